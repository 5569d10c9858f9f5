/* Capability probe for packaging/README.md: what a process may read and do
 * to another process (argv[1] = its pid), the way mcp-reaperd does it.
 * With a second argument it also subscribes to the netlink proc connector.
 * Run through packaging/cap-probe/run.sh (as root). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <linux/connector.h>
#include <linux/cn_proc.h>

static void rl(const char *what, const char *p) {
  char b[512]; ssize_t n = readlink(p, b, sizeof b - 1);
  if (n < 0) printf("%-22s FAIL %s\n", what, strerror(errno)); else { b[n]=0; printf("%-22s ok   %s\n", what, b); }
}
static void rd(const char *what, const char *p) {
  int fd = open(p, O_RDONLY); if (fd < 0) { printf("%-22s FAIL open %s\n", what, strerror(errno)); return; }
  char b[4096]; ssize_t n = read(fd, b, sizeof b); close(fd);
  if (n < 0) printf("%-22s FAIL read %s\n", what, strerror(errno)); else printf("%-22s ok   %zd bytes\n", what, n);
}
int main(int argc, char **argv) {
  int pid = atoi(argv[1]); char p[256];
  snprintf(p, sizeof p, "/proc/%d/stat", pid); rd("stat", p);
  snprintf(p, sizeof p, "/proc/%d/cmdline", pid); rd("cmdline", p);
  snprintf(p, sizeof p, "/proc/%d/status", pid); rd("status", p);
  snprintf(p, sizeof p, "/proc/%d/exe", pid); rl("exe", p);
  snprintf(p, sizeof p, "/proc/%d/fd", pid);
  DIR *d = opendir(p); if (!d) printf("%-22s FAIL %s\n", "fd/ (opendir)", strerror(errno)); else { printf("%-22s ok\n", "fd/ (opendir)"); closedir(d); }
  snprintf(p, sizeof p, "/proc/%d/fd/0", pid); rl("fd/0", p);
  snprintf(p, sizeof p, "/proc/%d/ns/pid", pid); rl("ns/pid", p);
  snprintf(p, sizeof p, "/proc/%d/smaps_rollup", pid); rd("smaps_rollup", p);
  int pfd = syscall(SYS_pidfd_open, pid, 0);
  if (pfd < 0) printf("%-22s FAIL %s\n", "pidfd_open", strerror(errno)); else {
    printf("%-22s ok\n", "pidfd_open");
    if (syscall(SYS_pidfd_send_signal, pfd, 0, NULL, 0) < 0) printf("%-22s FAIL %s\n", "pidfd_send_signal(0)", strerror(errno)); else printf("%-22s ok\n", "pidfd_send_signal(0)");
  }
  if (argc > 2) {
    int s = socket(AF_NETLINK, SOCK_DGRAM|SOCK_CLOEXEC, NETLINK_CONNECTOR);
    if (s < 0) { printf("%-22s FAIL socket %s\n", "proc connector", strerror(errno)); return 0; }
    struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC, .nl_pid = 0 };
    if (bind(s, (struct sockaddr*)&sa, sizeof sa) < 0) { printf("%-22s FAIL bind %s\n", "proc connector", strerror(errno)); return 0; }
    struct { struct nlmsghdr nl; struct cn_msg cn; enum proc_cn_mcast_op op; } __attribute__((packed)) m;
    memset(&m, 0, sizeof m);
    m.nl.nlmsg_len = sizeof m; m.nl.nlmsg_type = NLMSG_DONE; m.nl.nlmsg_pid = getpid();
    m.cn.id.idx = CN_IDX_PROC; m.cn.id.val = CN_VAL_PROC; m.cn.len = sizeof(enum proc_cn_mcast_op);
    m.op = PROC_CN_MCAST_LISTEN;
    if (send(s, &m, sizeof m, 0) < 0) { printf("%-22s FAIL send %s\n", "proc connector", strerror(errno)); return 0; }
    /* listen ack arrives as a PROC_EVENT_NONE with err field; then wait for a fork event */
    if (fork() == 0) _exit(0);
    char buf[4096]; struct timeval tv = {2,0}; setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int got = 0;
    for (int i = 0; i < 20; i++) {
      ssize_t n = recv(s, buf, sizeof buf, 0); if (n <= 0) break;
      struct nlmsghdr *nh = (void*)buf; struct cn_msg *cn = NLMSG_DATA(nh); struct proc_event *ev = (void*)cn->data;
      if (ev->what == PROC_EVENT_NONE) { printf("%-22s ack err=%u\n", "proc connector", ev->event_data.ack.err); }
      else { got = 1; break; }
    }
    printf("%-22s %s\n", "proc connector events", got ? "ok (received event)" : "FAIL (no events)");
  }
  return 0;
}
