/* A small streaming JSON writer for the tools' --json output. It tracks
 * nesting and commas so callers cannot produce malformed documents; it never
 * allocates. Pure apart from writing to the given FILE. */
#ifndef SRD_TOOLS_JSON_WRITER_H
#define SRD_TOOLS_JSON_WRITER_H

#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json_writer {
  FILE *out;
  int depth;
  int count[JSON_MAX_DEPTH]; /* members written at each level */
  int error;                 /* misuse (too deep, unbalanced): output is not valid JSON */
};

void json_init(struct json_writer *w, FILE *out);
/* key is the member name inside an object, NULL inside an array or at top. */
void json_begin_object(struct json_writer *w, const char *key);
void json_end_object(struct json_writer *w);
void json_begin_array(struct json_writer *w, const char *key);
void json_end_array(struct json_writer *w);
void json_string(struct json_writer *w, const char *key, const char *value); /* NULL writes null */
void json_int(struct json_writer *w, const char *key, int64_t value);
void json_uint(struct json_writer *w, const char *key, uint64_t value);
/* Non-finite numbers are written as null: JSON has no NaN. */
void json_double(struct json_writer *w, const char *key, double value);
void json_bool(struct json_writer *w, const char *key, int value);
void json_null(struct json_writer *w, const char *key);
/* Ends the document with a newline; returns 0 when it was well formed. */
int json_finish(struct json_writer *w);

#endif
