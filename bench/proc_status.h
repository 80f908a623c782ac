/* bench/proc_status.h - a field of this process's /proc/self/status, for the
 * benchmark programs (header-only: each is one source file). */
#ifndef KCR_BENCH_PROC_STATUS_H
#define KCR_BENCH_PROC_STATUS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The number after "field:" in /proc/self/status (kB for VmRSS, VmHWM;
 * a count for Threads), or -1. */
static inline long proc_status(const char *field)
{
  char line[256];
  long v = -1;
  size_t n = strlen(field);
  FILE *f = fopen("/proc/self/status", "r");
  if(!f)
    return -1;
  while(fgets(line, sizeof(line), f))
    if(!strncmp(line, field, n) && line[n] == ':') {
      v = strtol(line + n + 1, NULL, 10);
      break;
    }
  fclose(f);
  return v;
}

#endif
