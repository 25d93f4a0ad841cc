/* execl, execle and execlp for libgpuspy.so (exec.rs). glibc's own build their argv and
 * call its internal execve and execvpe, which no preloaded library sees, so the image
 * would end without its dump being written first and the next image would not know it is
 * one. These build the argv the same way and call execve and execvpe through the symbol
 * table: the shim's wrappers. They are in C because stable Rust cannot define a variadic
 * function. The argv lives on the stack, as in glibc: exec must work in a vfork child,
 * where malloc is not safe. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

extern char **environ;
int execvpe(const char *file, char *const argv[], char *const envp[]);

/* How many arguments `ap` holds before its NULL, or -1 (E2BIG) past what exec takes. */
static ptrdiff_t arguments_before_null(va_list ap) {
    va_list count;
    va_copy(count, ap);
    ptrdiff_t n = 0;
    while (va_arg(count, const char *) != NULL) {
        if (++n == INT_MAX) {
            n = -1;
            break;
        }
    }
    va_end(count);
    return n;
}

/* argv[0] = arg, then the n arguments of `ap` and their NULL; `ap` is left past the NULL. */
static void take_arguments(char **argv, const char *arg, va_list *ap, ptrdiff_t n) {
    argv[0] = (char *)arg;
    for (ptrdiff_t i = 1; i <= n + 1; i++) argv[i] = va_arg(*ap, char *);
}

/* Declares `argv` from `arg` and the arguments after it, leaving `ap` open past the NULL. */
#define ARGV_FROM(arg)                                 \
    va_list ap;                                        \
    va_start(ap, arg);                                 \
    ptrdiff_t n = arguments_before_null(ap);           \
    if (n < 0) {                                       \
        va_end(ap);                                    \
        errno = E2BIG;                                 \
        return -1;                                     \
    }                                                  \
    char *argv[n + 2];                                 \
    take_arguments(argv, arg, &ap, n)

int execl(const char *path, const char *arg, ...) {
    ARGV_FROM(arg);
    va_end(ap);
    return execve(path, argv, environ);
}

int execle(const char *path, const char *arg, ...) {
    ARGV_FROM(arg);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}

int execlp(const char *file, const char *arg, ...) {
    ARGV_FROM(arg);
    va_end(ap);
    return execvpe(file, argv, environ);
}
