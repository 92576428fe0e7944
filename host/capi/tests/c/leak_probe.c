/*
 * Proves that leak checking is live in the C test harness: built and run exactly like the
 * other C tests (same flags, same library, same environment), it leaks an allocation on
 * purpose, and the harness expects LeakSanitizer to report it and fail the program. A clean
 * run of the other programs therefore means no leak was found, not that nobody looked.
 */
#include <naaice_ap2.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    char *lost = malloc(4096);
    if (lost == NULL) {
        return 2;
    }
    memset(lost, 1, 4096);
    printf("allocated %p and dropped it\n", (void *)lost);
    lost = NULL;
    return 0;
}
