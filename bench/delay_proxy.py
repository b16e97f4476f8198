"""A TCP proxy that holds each chunk a client sends for DELAY_MS before it
passes it on: in front of an S3 server, every request waits that long (a
distant object store). Answers pass at once.
  python3 bench/delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS"""
import asyncio
import sys

listen, target, delay = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) / 1000


async def pipe(reader, writer, hold):
    try:
        while data := await reader.read(65536):
            if hold:
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def serve(cr, cw):
    sr, sw = await asyncio.open_connection("127.0.0.1", target)
    await asyncio.gather(pipe(cr, sw, True), pipe(sr, cw, False))


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


asyncio.run(main())
