// Clocks and medians shared by the C probes under perf/ (checkpoint-sync.c,
// p5-floor.c): wall time, the process's CPU (every thread), the machine's
// busy time, and the median of a run's figures.
#ifndef SIGLAKE_PERF_PROBE_CLOCK_H
#define SIGLAKE_PERF_PROBE_CLOCK_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/** CPU time of the process, every thread (getrusage), in ms. */
static double cpu_ms(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

/** Busy time of the whole machine (every CPU, kernel threads included) from /proc/stat, in ms. */
static double machine_busy_ms(void) {
  FILE *f = fopen("/proc/stat", "r");
  unsigned long long v[8] = {0};
  if (f == NULL || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8) {
    perror("/proc/stat");
    exit(1);
  }
  fclose(f);
  // user nice system idle iowait irq softirq steal: busy = all but idle, iowait and steal
  return (double)(v[0] + v[1] + v[2] + v[5] + v[6]) * 1000.0 / sysconf(_SC_CLK_TCK);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/** The median of v[0..n), sorting v. */
static double median(double *v, int n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
