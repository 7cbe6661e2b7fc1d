"""A stand-in SGLang cheap enough that 64 run on two cores: one process, stdlib socket only.

It prints SGLang's startup lines (the classifier's markers and the fired-up line), listens on
--port and answers every HTTP request 200 with a small JSON body. The fleet bench measures
firedup's own work across many hosts, not an engine's startup.
"""

import socket
import sys
import time


def arg(name: str, default: str) -> str:
    argv = sys.argv[1:]
    return argv[argv.index(name) + 1] if name in argv else default


def say(text: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    sys.stdout.write(f"[{stamp}] {text}\n")
    sys.stdout.flush()


def main() -> None:
    host, port = arg("--host", "127.0.0.1"), int(arg("--port", "30000"))
    say("Load weight begin. avail mem=79.00 GB")
    say("Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=78.00 GB")
    server = socket.create_server((host, port), backlog=16)
    say(f"Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
    say("The server is fired up and ready to roll!")
    body = b'{"status": "ok"}'
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (
        len(body),
        body,
    )
    while True:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(2)
            try:
                conn.recv(4096)
                conn.sendall(reply)
            except OSError:
                pass


main()
