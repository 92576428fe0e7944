/*
 * Check counting for the C test programs: CHECK(cond) counts and reports a failed check
 * (with the library's last error), REQUIRE(cond) also ends the program. Include after the
 * library's header (it relies on the standard headers naaice.h includes).
 */
#ifndef NAAICE_TEST_CHECK_H
#define NAAICE_TEST_CHECK_H

static int checks = 0;
static int failures = 0;

/* Counts a check; returns its outcome. Evaluates `ok` once. */
static int check(int ok, const char *what, const char *file, int line) {
    checks++;
    if (!ok) {
        failures++;
        fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", file, line, what,
                naa_last_error());
    }
    return ok;
}

#define CHECK(cond) check((cond), #cond, __FILE__, __LINE__)

#define REQUIRE(cond)                                                                       \
    do {                                                                                    \
        if (!check((cond), #cond, __FILE__, __LINE__)) {                                    \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#endif
