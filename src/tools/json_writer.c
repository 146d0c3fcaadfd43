#include "json_writer.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void json_init(struct json_writer *w, FILE *out) {
  memset(w, 0, sizeof(*w));
  w->out = out;
}

static void write_escaped(FILE *out, const char *s) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': fputs("\\\"", out); break;
    case '\\': fputs("\\\\", out); break;
    case '\n': fputs("\\n", out); break;
    case '\r': fputs("\\r", out); break;
    case '\t': fputs("\\t", out); break;
    default:
      if (*p < 0x20) fprintf(out, "\\u%04x", *p);
      else fputc(*p, out);
    }
  }
  fputc('"', out);
}

/* Separator, indentation and key before any value. */
static void prefix(struct json_writer *w, const char *key) {
  if (w->depth > 0) {
    if (w->count[w->depth]++) fputc(',', w->out);
    fputc('\n', w->out);
    for (int i = 0; i < w->depth; i++) fputs("  ", w->out);
  } else if (w->count[0]++) {
    w->error = 1; /* a second top-level value */
  }
  if (key) {
    write_escaped(w->out, key);
    fputs(": ", w->out);
  }
}

static void open_scope(struct json_writer *w, const char *key, char c) {
  prefix(w, key);
  fputc(c, w->out);
  if (w->depth + 1 >= JSON_MAX_DEPTH) {
    w->error = 1;
    return;
  }
  w->depth++;
  w->count[w->depth] = 0;
}

static void close_scope(struct json_writer *w, char c) {
  if (w->depth == 0) {
    w->error = 1;
    return;
  }
  int had_members = w->count[w->depth] > 0;
  w->depth--;
  if (had_members) {
    fputc('\n', w->out);
    for (int i = 0; i < w->depth; i++) fputs("  ", w->out);
  }
  fputc(c, w->out);
}

void json_begin_object(struct json_writer *w, const char *key) { open_scope(w, key, '{'); }
void json_end_object(struct json_writer *w) { close_scope(w, '}'); }
void json_begin_array(struct json_writer *w, const char *key) { open_scope(w, key, '['); }
void json_end_array(struct json_writer *w) { close_scope(w, ']'); }

void json_string(struct json_writer *w, const char *key, const char *value) {
  prefix(w, key);
  if (value) write_escaped(w->out, value);
  else fputs("null", w->out);
}

void json_int(struct json_writer *w, const char *key, int64_t value) {
  prefix(w, key);
  fprintf(w->out, "%" PRId64, value);
}

void json_uint(struct json_writer *w, const char *key, uint64_t value) {
  prefix(w, key);
  fprintf(w->out, "%" PRIu64, value);
}

void json_double(struct json_writer *w, const char *key, double value) {
  prefix(w, key);
  if (isfinite(value)) fprintf(w->out, "%.6g", value);
  else fputs("null", w->out);
}

void json_bool(struct json_writer *w, const char *key, int value) {
  prefix(w, key);
  fputs(value ? "true" : "false", w->out);
}

void json_null(struct json_writer *w, const char *key) {
  prefix(w, key);
  fputs("null", w->out);
}

int json_finish(struct json_writer *w) {
  fputc('\n', w->out);
  fflush(w->out);
  return w->error || w->depth != 0 || w->count[0] != 1 ? -1 : 0;
}
