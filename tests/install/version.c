/* Prints the library's version and exits 0 when it is the one of the
 * headers this program was built with. */
#include <stdio.h>
#include <string.h>

#include <kcr.h>

int main(void)
{
  printf("%s\n", kcr_version());
  return strcmp(kcr_version(), KCR_VERSION) != 0;
}
