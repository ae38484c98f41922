// SPDX-License-Identifier: MIT
/*
 * Sweeps as files: each sweep becomes NAME.csv (a header line, then one
 * row per point), NAME.json (the same rows as objects, with the title and
 * axis labels) and NAME.gp, a gnuplot script that draws NAME.png from the
 * CSV (perf/plot.sh runs them). Nothing is written without --out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "perf.h"

const char *out_dir;
bool quiet;

struct sweep {
	char name[64], title[160], xlabel[64], ylabel[64], y2label[64];
	unsigned flags;
	int ncols;
	char cols[SWEEP_COLS][48];
	char axis[SWEEP_COLS];   /* '1' left, '2' right, '-' not drawn */
	double *rows;
	int nrows, cap;
};

void progress(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	va_start(ap, fmt);
	fputs("roshm-perf: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

double hist_us(const struct hist *h, double q)
{
	uint64_t want = (uint64_t)((double)h->n * q), cum = 0;

	if (!h->n)
		return 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		cum += h->b[i];
		if (cum > want || (cum == h->n && cum)) {
			if (i < 64)
				return us_of(i);
			unsigned e = (i - 64) / 32 + 6, m = (i - 64) % 32;
			/* the middle of the bucket */
			uint64_t lo = (uint64_t)(32 + m) << (e - 5);

			return us_of(lo + ((uint64_t)1 << (e - 5)) / 2);
		}
	}
	return 0;
}

struct sweep *sweep_new(const char *name, const char *title, const char *cols, const char *xlabel,
			const char *ylabel, const char *y2label, unsigned flags)
{
	struct sweep *s = calloc(1, sizeof(*s));
	char buf[512], *save = NULL;

	if (!s)
		die("sweep", -ENOMEM);
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->title, sizeof(s->title), "%s", title);
	snprintf(s->xlabel, sizeof(s->xlabel), "%s", xlabel);
	snprintf(s->ylabel, sizeof(s->ylabel), "%s", ylabel);
	snprintf(s->y2label, sizeof(s->y2label), "%s", y2label ? y2label : "");
	s->flags = flags;
	snprintf(buf, sizeof(buf), "%s", cols);
	for (char *c = strtok_r(buf, ",", &save); c && s->ncols < SWEEP_COLS;
	     c = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(c, ':');

		s->axis[s->ncols] = '1';
		if (colon) {
			*colon = 0;
			s->axis[s->ncols] = !strcmp(colon + 1, "y2") ? '2' : '-';
		}
		snprintf(s->cols[s->ncols++], sizeof(s->cols[0]), "%s", c);
	}
	return s;
}

void sweep_row(struct sweep *s, const double *v)
{
	if (s->nrows == s->cap) {
		int cap = s->cap ? 2 * s->cap : 32;
		double *r = realloc(s->rows, sizeof(double) * (size_t)cap * SWEEP_COLS);

		if (!r)
			die("sweep", -ENOMEM);
		s->rows = r;
		s->cap = cap;
	}
	memcpy(&s->rows[(size_t)s->nrows++ * SWEEP_COLS], v, sizeof(double) * (size_t)s->ncols);
}

static FILE *open_out(const struct sweep *s, const char *ext, char *path, size_t cap)
{
	FILE *f;

	snprintf(path, cap, "%s/%s.%s", out_dir, s->name, ext);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "roshm-perf: cannot write %s: %s\n", path, strerror(errno));
		exit(1);
	}
	return f;
}

static void write_csv(const struct sweep *s)
{
	char path[1024];
	FILE *f = open_out(s, "csv", path, sizeof(path));

	for (int c = 0; c < s->ncols; c++)
		fprintf(f, "%s%s", c ? "," : "", s->cols[c]);
	fputc('\n', f);
	for (int r = 0; r < s->nrows; r++) {
		for (int c = 0; c < s->ncols; c++)
			fprintf(f, "%s%.6g", c ? "," : "", s->rows[(size_t)r * SWEEP_COLS + (size_t)c]);
		fputc('\n', f);
	}
	if (fclose(f))
		die(path, -EIO);
}

static void write_json(const struct sweep *s)
{
	char path[1024];
	json_t *o = json_object(), *rows = json_array(), *cols = json_array();

	for (int c = 0; c < s->ncols; c++)
		json_array_append_new(cols, json_string(s->cols[c]));
	for (int r = 0; r < s->nrows; r++) {
		json_t *row = json_object();

		for (int c = 0; c < s->ncols; c++)
			json_object_set_new(row, s->cols[c],
					    json_real(s->rows[(size_t)r * SWEEP_COLS + (size_t)c]));
		json_array_append_new(rows, row);
	}
	json_object_set_new(o, "sweep", json_string(s->name));
	json_object_set_new(o, "title", json_string(s->title));
	json_object_set_new(o, "x", json_string(s->xlabel));
	json_object_set_new(o, "y", json_string(s->ylabel));
	if (s->y2label[0])
		json_object_set_new(o, "y2", json_string(s->y2label));
	json_object_set_new(o, "columns", cols);
	json_object_set_new(o, "rows", rows);
	snprintf(path, sizeof(path), "%s/%s.json", out_dir, s->name);
	if (json_dump_file(o, path, JSON_INDENT(1) | JSON_REAL_PRECISION(6))) {
		fprintf(stderr, "roshm-perf: cannot write %s\n", path);
		exit(1);
	}
	json_decref(o);
}

/* gnuplot: single quotes in strings are doubled */
static void gp_str(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		fputc(*s, f);
	}
	fputc('\'', f);
}

static void write_gp(const struct sweep *s)
{
	char path[1024];
	FILE *f = open_out(s, "gp", path, sizeof(path));
	bool y2 = false, first = true;

	fprintf(f, "# gnuplot %s.gp (in this directory) draws %s.png from %s.csv\n", s->name, s->name,
		s->name);
	fprintf(f, "set terminal pngcairo size 960,600 noenhanced font ',10'\n");
	fprintf(f, "set output '%s.png'\nset datafile separator ','\n", s->name);
	fputs("set title ", f);
	gp_str(f, s->title);
	fputs("\nset xlabel ", f);
	gp_str(f, s->xlabel);
	fputs("\nset ylabel ", f);
	gp_str(f, s->ylabel);
	fputs("\nset grid\nset key outside bottom center horizontal\n", f);
	if (s->flags & SW_LOGX)
		fputs("set logscale x 2\n", f);
	if (s->flags & SW_BYTES)
		fputs("set format x '%.0b%BB'\n", f);
	if (s->flags & SW_LOGY)
		fputs("set logscale y\n", f);
	for (int c = 1; c < s->ncols; c++)
		y2 |= s->axis[c] == '2';
	if (y2) {
		fputs("set y2label ", f);
		gp_str(f, s->y2label);
		fputs("\nset y2tics\nset ytics nomirror\n", f);
		if (s->flags & (SW_LOGY | SW_LOGY2))
			fputs("set logscale y2\n", f);
	}
	fputs("plot ", f);
	for (int c = 1; c < s->ncols; c++) {
		if (s->axis[c] == '-')
			continue;
		fprintf(f, "%s'%s.csv' using 1:%d with linespoints title ", first ? "" : ", \\\n     ",
			s->name, c + 1);
		gp_str(f, s->cols[c]);
		if (s->axis[c] == '2')
			fputs(" axes x1y2", f);
		first = false;
	}
	fputc('\n', f);
	if (fclose(f))
		die(path, -EIO);
}

void sweep_done(struct sweep *s)
{
	if (out_dir && s->nrows) {
		mkdir(out_dir, 0755);
		write_csv(s);
		write_json(s);
		write_gp(s);
		printf(" sweep %s: %s/%s.{csv,json,gp}\n", s->name, out_dir, s->name);
	}
	free(s->rows);
	free(s);
}
