"""A minimal Redis client (RESP2 over one socket) for the probes that measure Redis's own CPU on a
scratch redis-server (`letter_index_probe.py`, `batch_script_probe.py`): no dependency beyond the
standard library, and nothing between the probe and the commands it counts."""
import re
import socket


class Redis:
    def __init__(self, port, host='127.0.0.1'):
        self.sock = socket.create_connection((host, port))
        self.file = self.sock.makefile('rb')

    def cmd(self, *args):
        """Sends one command and returns its reply (bytes, int, None or a list); an error reply raises."""
        out = [b'*%d\r\n' % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b'$%d\r\n%s\r\n' % (len(a), a))
        self.sock.sendall(b''.join(out))
        return self.read()

    def read(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b'+':
            return rest
        if kind == b'-':
            raise RuntimeError(rest.decode())
        if kind == b':':
            return int(rest)
        if kind == b'$':
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        n = int(rest)
        return None if n < 0 else [self.read() for _ in range(n)]

    def cpu(self):
        """Redis's CPU seconds so far (user + system, `INFO cpu`)."""
        info = self.cmd('INFO', 'cpu').decode()
        return sum(float(x) for x in re.findall(r'used_cpu_(?:sys|user):([\d.]+)', info))
