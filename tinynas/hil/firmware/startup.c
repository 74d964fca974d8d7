/* Reset and faults of the hardware-in-the-loop firmware: copy .data, zero .bss, enable the FPU where there is one,
 * run main. A fault prints e-[fault] on the UART and resets the chip (hil_main.c), so the host sees a reset, never
 * a silent board. */
#include <stdint.h>

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[], __stack_top[];
int main(void);
void hil_fault(void) __attribute__((noreturn));

void reset_handler(void) __attribute__((noreturn));

void reset_handler(void)
{
    uint32_t *src = __data_load;
    uint32_t *dst;
    for (dst = __data_start; dst < __data_end; ++dst, ++src) {
        *dst = *src;
    }
    for (dst = __bss_start; dst < __bss_end; ++dst) {
        *dst = 0u;
    }
#if defined(__ARM_FP)
    /* CPACR: full access to CP10/CP11, else the first floating-point instruction faults. */
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
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
