#!/usr/bin/env python3
"""A TCP forwarder for the e2e tests, run inside the test's namespace: listens on 127.0.0.1
(a port picked by the kernel, printed as `PORT <n>`), forwards to 127.0.0.1:TARGET (or to
HOST:TARGET when a second argument names HOST), and on each
`cut` line read from stdin resets every connection it carries (prints `CUT <count>`) while new
connections keep working. With `--delay-ms N` (first argument), everything it forwards from the
server to the client arrives N ms late, in order: a client whose signaling lags behind its media."""
import asyncio
import socket
import struct
import sys


async def main(target, host="127.0.0.1", delay=0.0):
    pairs = []

    async def accept(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(host, target)
        except OSError:
            writer.close()
            return
        pairs.append((writer, up_writer))

        async def chunks(src):
            try:
                while data := await src.read(65536):
                    yield data
            except (ConnectionError, OSError):
                pass

        async def held_back(source):
            """`source`'s chunks, each held back `delay` seconds from when it was read."""
            loop = asyncio.get_running_loop()
            queue = asyncio.Queue()

            async def read():
                async for data in source:
                    queue.put_nowait((loop.time() + delay, data))
                queue.put_nowait(None)

            reading = asyncio.create_task(read())
            try:
                while (item := await queue.get()) is not None:
                    due, data = item
                    await asyncio.sleep(max(0.0, due - loop.time()))
                    yield data
            finally:
                reading.cancel()

        async def pump(source, dst):
            try:
                async for data in source:
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        downstream = held_back(chunks(up_reader)) if delay > 0 else chunks(up_reader)
        await asyncio.gather(pump(chunks(reader), up_writer), pump(downstream, writer))

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    while line := await stdin.readline():
        if line.strip() != b"cut":
            continue
        count = len(pairs)
        for a, b in pairs:
            for w in (a, b):
                sock = w.get_extra_info("socket")
                try:
                    # An abortive close: the peer sees the connection reset, as when a network dies.
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
                w.transport.abort()
        pairs.clear()
        print(f"CUT {count}", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    delay_ms = 0
    if args[:1] == ["--delay-ms"]:
        delay_ms, args = int(args[1]), args[2:]
    asyncio.run(main(int(args[0]), *args[1:2], delay=delay_ms / 1000))
