/* brisk command line (being built). */
#include <stdio.h>
int main(void) { puts("brisk: under construction"); return 1; }
