/* Architecture-neutral asm headers for the BPF target (no multiarch include dir needed). */
#include <asm-generic/types.h>
