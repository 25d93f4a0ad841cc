/* A shared library whose constructor creates the file named by $MARKER_<TAG> (TAG is set
 * with -DTAG=...): proves whether ld.so loaded it into a process. Built with cc -shared. */
#include <stdio.h>
#include <stdlib.h>

#define STR2(x) #x
#define STR(x) STR2(x)

__attribute__((constructor)) static void loaded(void) {
    const char *path = getenv("MARKER_" STR(TAG));
    if (!path) return;
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
}
