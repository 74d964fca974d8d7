/* Reset and fault handling for both boards: copy .data, zero .bss, enable the FPU where there is one,
 * run main, leave through semihosting. A fault also leaves through semihosting, with an error status,
 * so that QEMU always ends by itself instead of spinning in a handler. */
#include <stdint.h>

#include "memory_init.h"

#include "semihost.h"

extern uint32_t __stack_top[];
int main(void);

void reset_handler(void) __attribute__((noreturn));
void fault_handler(void) __attribute__((noreturn));

void reset_handler(void)
{
    init_memory();
    sh_exit(main() == 0 ? SH_EXIT_OK : SH_EXIT_ERROR);
}

void fault_handler(void)
{
    sh_print("tinynas-harness: fault (HardFault, NMI or an unexpected interrupt)\n");
    sh_exit(SH_EXIT_ERROR);
}

/* The 16 core exceptions only: the harness enables no peripheral interrupt. */
__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))(uintptr_t)__stack_top,
    reset_handler,
    fault_handler, fault_handler, fault_handler, fault_handler, fault_handler,
    0, 0, 0, 0,
    fault_handler, fault_handler, 0,
    fault_handler, fault_handler,
};
