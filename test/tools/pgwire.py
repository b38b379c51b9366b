#!/usr/bin/env python3
"""A minimal PostgreSQL wire-protocol client for the TAP tests.

It sends exactly the protocol messages a test asks for, which libpq and
psql do not allow: a Bind without an Execute, a fast-path function call
(the FunctionCall message) to any function.  Commands come one per line on
standard input; what the server answers is printed one line per message
that matters, flushed at once:

    query SQL                simple query, then wait for ReadyForQuery
    parse NAME SQL           Parse (no parameter types: the server infers)
    parsetyped NAME OIDS SQL Parse with parameter types (comma-separated)
    bind PORTAL NAME [P...]  Bind, text parameters (the word NULL is null)
    execute PORTAL ROWS      Execute
    sync                     Sync, then wait for ReadyForQuery
    flush                    Flush
    fastpath OID [A...]      FunctionCall with text arguments, then wait
    wait                     wait for ReadyForQuery
    sleep SECONDS
    waitfor PATH             wait until the file PATH exists (the test
                             creates it when it has looked at the server)
    quit                     Terminate

Printed: "ROW v1|v2...", "COMPLETE tag", "NOTICE sqlstate message",
"ERROR sqlstate message", "FATAL sqlstate message", "RESULT value" (a
fast-path call), "PARSED", "BOUND", "READY status", "CLOSED" (the server
closed the connection).

Usage: pgwire.py HOST PORT USER DATABASE   (HOST may be a socket directory)
"""
import os
import socket
import struct
import sys
import time


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Conn:
    def __init__(self, host, port, user, database):
        if host.startswith("/"):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(os.path.join(host, ".s.PGSQL.%d" % port))
        else:
            self.sock = socket.create_connection((host, port))
        self.buf = b""
        params = b""
        for k, v in (("user", user), ("database", database),
                     ("application_name", "pgwire")):
            params += k.encode() + b"\0" + v.encode() + b"\0"
        body = struct.pack("!I", 196608) + params + b"\0"
        self.sock.sendall(struct.pack("!I", len(body) + 4) + body)
        self.wait_ready()

    def send(self, kind, body):
        self.sock.sendall(kind + struct.pack("!I", len(body) + 4) + body)

    def recv(self):
        while len(self.buf) < 5:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None, None
            self.buf += chunk
        kind = self.buf[:1]
        (length,) = struct.unpack("!I", self.buf[1:5])
        while len(self.buf) < 1 + length:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None, None
            self.buf += chunk
        body = self.buf[5:1 + length]
        self.buf = self.buf[1 + length:]
        return kind, body

    @staticmethod
    def fields(body):
        f = {}
        for part in body.split(b"\0"):
            if part:
                f[part[:1].decode()] = part[1:].decode(errors="replace")
        return f

    def wait_ready(self):
        """Print messages until ReadyForQuery (or the connection closes)."""
        while True:
            try:
                kind, body = self.recv()
            except ConnectionResetError:
                kind = None
            if kind is None:
                out("CLOSED")
                return False
            if kind == b"R":
                (code,) = struct.unpack("!I", body[:4])
                if code != 0:
                    out("FATAL 28000 authentication method %d not supported" % code)
                    return False
            elif kind == b"Z":
                out("READY " + body.decode())
                return True
            elif kind == b"E":
                f = self.fields(body)
                out("%s %s %s" % (f.get("V", f.get("S", "ERROR")),
                                  f.get("C", ""), f.get("M", "")))
            elif kind == b"N":
                f = self.fields(body)
                out("NOTICE %s %s" % (f.get("C", ""), f.get("M", "")))
            elif kind == b"D":
                (n,) = struct.unpack("!H", body[:2])
                pos, vals = 2, []
                for _ in range(n):
                    (ln,) = struct.unpack("!i", body[pos:pos + 4])
                    pos += 4
                    if ln < 0:
                        vals.append("NULL")
                    else:
                        vals.append(body[pos:pos + ln].decode(errors="replace"))
                        pos += ln
                out("ROW " + "|".join(vals))
            elif kind == b"C":
                out("COMPLETE " + body.rstrip(b"\0").decode())
            elif kind == b"1":
                out("PARSED")
            elif kind == b"2":
                out("BOUND")
            elif kind == b"V":
                (ln,) = struct.unpack("!i", body[:4])
                out("RESULT " + ("NULL" if ln < 0 else
                                 body[4:4 + ln].decode(errors="replace")))
            # ParameterStatus, BackendKeyData, RowDescription, NoData,
            # PortalSuspended, EmptyQuery, notifications: not printed


def cstr(s):
    return s.encode() + b"\0"


def params(values):
    body = struct.pack("!H", len(values))
    for v in values:
        if v == "NULL":
            body += struct.pack("!i", -1)
        else:
            b = v.encode()
            body += struct.pack("!i", len(b)) + b
    return body


def main():
    host, port, user, database = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    c = Conn(host, port, user, database)
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        cmd, _, rest = line.partition(" ")
        try:
            if cmd == "query":
                c.send(b"Q", cstr(rest))
                c.wait_ready()
            elif cmd == "parse":
                name, _, sql = rest.partition(" ")
                c.send(b"P", cstr(name) + cstr(sql) + struct.pack("!H", 0))
            elif cmd == "parsetyped":
                name, oids, sql = rest.split(" ", 2)
                ol = [int(o) for o in oids.split(",")]
                c.send(b"P", cstr(name) + cstr(sql) + struct.pack("!H", len(ol)) +
                       b"".join(struct.pack("!I", o) for o in ol))
            elif cmd == "bind":
                parts = rest.split(" ")
                portal, stmt, vals = parts[0], parts[1], parts[2:]
                c.send(b"B", cstr(portal) + cstr(stmt) + struct.pack("!H", 0) +
                       params(vals) + struct.pack("!H", 0))
            elif cmd == "execute":
                portal, rows = rest.split(" ")
                c.send(b"E", cstr(portal) + struct.pack("!I", int(rows)))
            elif cmd == "sync":
                c.send(b"S", b"")
                c.wait_ready()
            elif cmd == "flush":
                c.send(b"H", b"")
            elif cmd == "fastpath":
                parts = rest.split(" ")
                oid, vals = int(parts[0]), parts[1:]
                c.send(b"F", struct.pack("!I", oid) + struct.pack("!HH", 1, 0) +
                       params(vals) + struct.pack("!H", 0))
                c.wait_ready()
            elif cmd == "wait":
                c.wait_ready()
            elif cmd == "sleep":
                time.sleep(float(rest))
            elif cmd == "waitfor":
                while not os.path.exists(rest):
                    time.sleep(0.02)
            elif cmd == "quit":
                c.send(b"X", b"")
                break
            else:
                out("BADCOMMAND " + cmd)
        except (BrokenPipeError, ConnectionResetError):
            # what the server said before it closed the connection
            try:
                c.wait_ready()
            except OSError:
                out("CLOSED")
            break
    out("DONE")


if __name__ == "__main__":
    main()
