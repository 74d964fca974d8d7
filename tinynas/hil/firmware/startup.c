/* Reset and faults of the hardware-in-the-loop firmware: copy .data, zero .bss, enable the FPU where there is one,
 * run main. A fault prints e-[fault] on the UART and resets the chip (hil_main.c), so the host sees a reset, never
 * a silent board. */
#include <stdint.h>

#include "memory_init.h"

extern uint32_t __stack_top[];
int main(void);
void hil_fault(void) __attribute__((noreturn));

void reset_handler(void) __attribute__((noreturn));

void reset_handler(void)
{
    init_memory();
    (void)main();
    hil_fault();
}

/* The 16 core exceptions only: the firmware enables no peripheral interrupt. */
__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))(uintptr_t)__stack_top,
    reset_handler,
    hil_fault, hil_fault, hil_fault, hil_fault, hil_fault,
    0, 0, 0, 0,
    hil_fault, hil_fault, 0,
    hil_fault, hil_fault,
};
