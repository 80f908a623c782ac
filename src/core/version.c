/* version.c - the run-time version of libkcr (kcr/version.h). */
#include "kcr/version.h"

const char *kcr_version(void) { return KCR_VERSION; }
