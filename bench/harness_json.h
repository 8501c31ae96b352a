/* What the C harnesses (bench/dpdk, bench/dpdk-reorder) share for --json,
 * the form the test matrix reads (crates/bench/cases.toml): a leading
 * "--json" sends the human-readable tables to stderr and leaves stdout to
 * one JSON object. */
#ifndef STEER_HARNESS_JSON_H
#define STEER_HARNESS_JSON_H

#include <stdio.h>
#include <string.h>

/* Takes a leading "--json" off the arguments; returns 1 when it was there.
 * *tables is where the human-readable output goes: stdout, or stderr with
 * --json. */
static inline int take_json_flag(int *argc, char ***argv, FILE **tables)
{
	int json = *argc > 1 && strcmp((*argv)[1], "--json") == 0;

	if (json) {
		(*argc)--;
		(*argv)++;
	}
	*tables = json ? stderr : stdout;
	return json;
}

/* `s` as a JSON string on stdout (names and reasons: quotes and
 * backslashes escaped, control characters as spaces). */
static inline void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar((unsigned char)*s >= ' ' ? *s : ' ');
	}
	putchar('"');
}

#endif
