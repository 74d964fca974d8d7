/* Arm semihosting (BKPT 0xAB on M-profile): the guest's only link to the host. QEMU serves it when run
 * with -semihosting-config enable=on,target=native; files are opened relative to QEMU's working folder.
 * Written out here rather than taken from picolibc's libsemihost so that the harness stays a handful of
 * calls with no stdio behind them (the micro:bit has 16 KB of RAM). */
#ifndef TINYNAS_SEMIHOST_H
#define TINYNAS_SEMIHOST_H

#include <stdint.h>

#define SH_SYS_OPEN 0x01
#define SH_SYS_CLOSE 0x02
#define SH_SYS_WRITE0 0x04
#define SH_SYS_WRITE 0x05
#define SH_SYS_READ 0x06
#define SH_SYS_EXIT 0x18
#define SH_MODE_RB 1
#define SH_MODE_WB 5
#define SH_EXIT_OK 0x20026u   /* ADP_Stopped_ApplicationExit: QEMU exits with status 0 */
#define SH_EXIT_ERROR 0x20023u /* ADP_Stopped_RunTimeErrorUnknown: QEMU exits with status 1 */

static inline int32_t semihost_call(int32_t op, const void *arg)
{
    register int32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void sh_print(const char *text);
int32_t sh_open(const char *name, uint32_t length, uint32_t mode);
/* Both return the number of bytes NOT transferred, as the semihosting calls do (0 = all of them). */
uint32_t sh_read(int32_t handle, void *buffer, uint32_t length);
uint32_t sh_write(int32_t handle, const void *buffer, uint32_t length);
void sh_close(int32_t handle);
void sh_exit(uint32_t reason) __attribute__((noreturn));

#endif
