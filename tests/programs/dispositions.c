/* The signal dispositions a program sees under the shim, which installs its own handler for
 * SIGINT, SIGTERM, SIGHUP and SIGABRT at the first driver call. Prints SIGINT's and
 * SIGTERM's disposition as sigaction and signal report it: before the first driver call,
 * after it, after installing its own SIGINT handler (and what sigaction said it replaced),
 * and after setting SIGTERM to SIG_DFL again; then "ready", and waits for a signal. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cuda_min.h"

static void own_handler(int sig) {
    (void)sig;
    static const char msg[] = "handled\n";
    write(1, msg, sizeof msg - 1);
}

static const char *name_of(void (*handler)(int)) {
    if (handler == SIG_DFL) return "SIG_DFL";
    if (handler == SIG_IGN) return "SIG_IGN";
    return handler == own_handler ? "own" : "another";
}

/* "<when> SIGINT <by sigaction> <by signal> SIGTERM <by sigaction> <by signal>"; signal()
 * is asked by setting the disposition sigaction reported. */
static void print_dispositions(const char *when) {
    printf("%s", when);
    int signals[] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        struct sigaction old;
        sigaction(signals[i], NULL, &old);
        void (*previous)(int) = signal(signals[i], old.sa_handler);
        printf(" %s %s %s", i ? "SIGTERM" : "SIGINT", name_of(old.sa_handler), name_of(previous));
    }
    printf("\n");
}

int main(void) {
    print_dispositions("before");
    for (int i = 0; i < 10; i++) cuLaunchKernel(0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    print_dispositions("after-first-call");
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = own_handler;
    sigemptyset(&act.sa_mask);
    sigaction(SIGINT, &act, &old);
    printf("replaced-SIGINT %s\n", name_of(old.sa_handler));
    print_dispositions("own-SIGINT");
    signal(SIGTERM, SIG_DFL);
    print_dispositions("SIGTERM-reset");
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
