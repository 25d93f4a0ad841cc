/* Runs ARGV[2..] as a child forked from this small process and writes its wait status, peak
 * RSS (KiB) and CPU seconds to the file ARGV[1], from wait4. A child started straight from
 * the test process inherits that process's peak: the kernel counts the memory of the
 * process that execs, which for posix_spawn is the test process's own. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    pid_t pid = fork();
    if (pid < 0) return 3;
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        _exit(127);
    }
    int status;
    struct rusage u;
    if (wait4(pid, &status, 0, &u) != pid) return 4;
    FILE *f = fopen(argv[1], "w");
    if (!f) return 5;
    fprintf(f, "%d %ld %f\n", status, u.ru_maxrss,
            u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6);
    return fclose(f) == 0 ? 0 : 6;
}
