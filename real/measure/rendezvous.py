"""The rendezvous of a ``collsim bench`` job: where its store listens, and the token a rank must show.

**Where it listens.** torch's TCPStore, left to itself, listens on every interface. collsim binds the
socket itself and hands it to the store (``master_listen_fd``): on 127.0.0.1 when it starts its own
ranks or when every rank of an MPI/Slurm job is on this host, else on the address asked for
(``--listen ADDR``) or the launcher's master address (``MASTER_ADDR``, Slurm's first host). gloo's own
sockets go on the interface that reaches that address (``GLOO_SOCKET_IFNAME``, unless you set it).
Under torchrun its agent serves the store (``TORCHELASTIC_USE_AGENT_STORE``): where that listens is
torchrun's choice, not collsim's.

**The token.** TCPStore has no authentication: anyone who reaches the port can read and write keys. So
before any collective every rank proves it holds the job's shared secret (``--token-file FILE`` or
``COLLSIM_TOKEN``; a run that starts its own ranks makes a random one): rank 0 writes a random
challenge; each rank answers with an HMAC-SHA256 of the challenge, its rank, the world size and a
nonce of its own, keyed with the token; rank 0 checks every answer and either admits all ranks, with
an HMAC of each rank's nonce (so a rank knows the store it reached is its own job's rank 0), or refuses
the job, naming the ranks whose answer was wrong. A rank number claimed twice is refused too.

What this protects: a process without the token (a stale rank, another job or user that picked the same
port, a casual connection) cannot join the job or make it measure anything; the token itself never
crosses the network. What it does not: the store and gloo/NCCL traffic are neither encrypted nor
authenticated after the check, so someone who can reach the port can still read the keys, overwrite
them (and so stop or redirect the run), or connect to gloo's sockets. Use it on a network you trust,
with a firewall around the job; docs/multinode.md says the same.

>>> mac(b"k", "a", 1) == mac(b"k", "a", 1) != mac(b"k", "a", 2)
True
"""
from __future__ import annotations

import datetime
import errno
import fcntl
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import socket
import stat
import struct

from sim.errors import CollsimError

from .launchers import Job

TOKEN_VAR = "COLLSIM_TOKEN"
MAX_TOKEN_BYTES = 4096
PREFIX = "collsim/join/"
SEEN_WAIT_S = 10.0   # how long a refusing rank 0 keeps the store up so the refused ranks can read why


def read_token(token_file: str | None, environ=None) -> str | None:
    """The shared secret: ``--token-file`` (a regular file only its owner can read), else
    ``$COLLSIM_TOKEN``; None when neither is given."""
    environ = os.environ if environ is None else environ
    if token_file:
        from sim.io.safe_io import read_input
        try:
            mode = os.stat(token_file).st_mode
        except OSError as e:
            raise CollsimError(f"--token-file {token_file}: {e.strerror}: give a file holding the job's secret") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CollsimError(f"--token-file {token_file} can be read by other users (mode {stat.S_IMODE(mode):o}): "
                               f"chmod 600 {token_file}")
        text = read_input(token_file, "--token-file", MAX_TOKEN_BYTES).strip()
        if not text:
            raise CollsimError(f"--token-file {token_file} is empty: write the secret into it, e.g. "
                               f"openssl rand -hex 32 > {token_file}")
        return text
    value = environ.get(TOKEN_VAR)
    if value is not None and not value.strip():
        raise CollsimError(f"{TOKEN_VAR} is set but empty: set it to the job's secret (e.g. openssl rand -hex 32) "
                           "or unset it")
    return value.strip() if value else None


def new_token() -> str:
    """A random secret for a run that starts its own ranks."""
    return secrets.token_hex(32)


def resolve(addr: str) -> str:
    """``addr`` (a name or an IP address) as an IP address string."""
    try:
        return str(socket.getaddrinfo(addr, None, type=socket.SOCK_STREAM)[0][4][0])
    except (socket.gaierror, UnicodeError) as e:
        raise CollsimError(f"cannot resolve the rendezvous address {addr!r} ({e}): give an IP address "
                           "(--listen ADDR or MASTER_ADDR)") from None


def is_loopback(addr: str) -> bool:
    return ipaddress.ip_address(resolve(addr).split("%")[0]).is_loopback


def every_interface(addr: str) -> bool:
    """Whether ``addr`` is the unspecified address (``0.0.0.0``, ``::``, ``0``): a socket bound to it listens on
    every interface of the host, which the rendezvous never does."""
    return ipaddress.ip_address(resolve(addr).split("%")[0]).is_unspecified


def refuse_every_interface(addr: str, source: str = "--listen") -> None:
    """One line, before anything listens, where ``addr`` means every interface."""
    if every_interface(addr):
        raise CollsimError(f"{source} {addr} means every interface of this host, and the rendezvous never listens on all "
                           "of them: give this host's address on the job's network (e.g. --listen 10.0.0.5), or leave "
                           "--listen out for a run on this host (it listens on 127.0.0.1)")


def listener(addr: str, port: int, spans_hosts: bool) -> socket.socket:
    """A TCP socket listening on ``addr``:``port`` only (never all interfaces): the store's socket."""
    refuse_every_interface(addr, "the rendezvous address")
    ip = resolve(addr)
    if spans_hosts and ipaddress.ip_address(ip.split("%")[0]).is_loopback:
        raise CollsimError(f"the rendezvous address {addr!r} is {ip} on this host, which other hosts cannot reach "
                           "(on Debian the host name often maps to 127.0.1.1 in /etc/hosts): pass --listen "
                           "<this host's address on the job's network> or MASTER_ADDR=<that address>")
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((ip, port))
        s.listen(1024)
    except OSError as e:
        s.close()
        if e.errno == errno.EADDRNOTAVAIL:
            raise CollsimError(f"rank 0 runs on {socket.gethostname()}, which does not have the rendezvous address {addr} "
                               f"({ip}): set MASTER_ADDR (or --listen) to rank 0's host") from None
        if e.errno == errno.EADDRINUSE:
            raise CollsimError(f"port {port} on {ip} is already in use (another job?): pick a free one with "
                               "MASTER_PORT=<port>") from None
        raise CollsimError(f"cannot listen on {ip}:{port}: {e.strerror}") from None
    return s


def interface_for(addr: str) -> str | None:
    """Name of this host's interface that reaches ``addr`` (``lo`` for 127.0.0.1), or None if unknown
    (IPv6, no such interface, not Linux)."""
    try:
        ip = resolve(addr)
        if ":" in ip:
            return None
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((ip, 9))   # UDP: no packet is sent; the kernel picks the route and our address
            mine = s.getsockname()[0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _, name in socket.if_nameindex():
                try:
                    raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
                except OSError:
                    continue
                if socket.inet_ntoa(raw[20:24]) == mine:
                    return name
    except (OSError, CollsimError):
        return None
    return None


def make_store(job: Job, timeout_s: float, listen: str | None = None, listen_fd: int | None = None):
    """The job's TCPStore: served by this process (rank 0 of a job collsim serves, on ``listen_fd`` or a
    socket bound to ``listen``/the master address), or a client of the master's."""
    import torch.distributed as dist
    timeout = datetime.timedelta(seconds=timeout_s)
    addr = listen or job.master_addr
    if not job.serve_store:   # torchrun's agent serves it
        return dist.TCPStore(job.master_addr, job.master_port, job.world, False, timeout)
    if job.rank != 0:
        return dist.TCPStore(addr, job.master_port, job.world, False, timeout)
    sock = None
    if listen_fd is None:
        sock = listener(addr, job.master_port, spans_hosts=(job.nnodes or 2) > 1 and job.local_world != job.world)
        listen_fd = sock.fileno()
    try:
        return dist.TCPStore(addr, job.master_port, job.world, True, timeout, wait_for_workers=False,
                             master_listen_fd=listen_fd)
    finally:
        if sock is not None:
            sock.detach()   # the store owns the descriptor now


def mac(key: bytes, *parts) -> str:
    """HMAC-SHA256 of the parts joined by ``|``, hex."""
    return hmac.new(key, "|".join(map(str, parts)).encode(), hashlib.sha256).hexdigest()


def _key(token: str | None) -> bytes:
    # no token: an empty key still catches a duplicate rank or a different job on the same port
    return hashlib.sha256(b"collsim-token:" + token.encode()).digest() if token else b""


def _get(store, key: str) -> dict:
    store.wait([PREFIX + key])
    return json.loads(store.get(PREFIX + key).decode())


def handshake(store, rank: int, world: int, host: str, token: str | None) -> None:
    """Admit every rank that holds the token before any collective runs (see the module docstring).
    Raises CollsimError on this rank when the job is refused."""
    key = _key(token)
    if store.add(PREFIX + f"claim/{rank}", 1) != 1:
        raise CollsimError(f"rank {rank} is claimed by two processes of this job (stale RANK/SLURM_PROCID/OMPI "
                           "variables, or two jobs on one MASTER_PORT): give each job its own port")
    if rank == 0:
        challenge = secrets.token_hex(16)
        store.set(PREFIX + "challenge", json.dumps({"challenge": challenge, "world": world}))
        answers = {r: _get(store, f"answer/{r}") for r in range(1, world)}
        bad = [r for r, a in answers.items()
               if not hmac.compare_digest(str(a.get("mac")), mac(key, challenge, r, world, a.get("host"), a.get("nonce")))]
        sent = {"ok": not bad, "refused": bad,
                   "proof": {str(r): mac(key, "admit", a.get("nonce"), r) for r, a in answers.items() if r not in bad}}
        store.set(PREFIX + "verdict", json.dumps(sent))
        if bad:
            try:   # keep the store up until the refused ranks have read why (a dead one: stop waiting)
                store.wait([PREFIX + f"seen/{r}" for r in bad], datetime.timedelta(seconds=SEEN_WAIT_S))
            except (RuntimeError, ValueError):   # torch's DistStoreError (a RuntimeError) on timeout
                pass
            who = ", ".join(f"{r} ({answers[r].get('host')})" for r in bad)
            raise CollsimError(f"refused rank(s) {who}: their token differs from rank 0's; give every rank the same "
                               f"secret ({TOKEN_VAR} or --token-file)")
        return
    got = _get(store, "challenge")
    if got.get("world") != world:
        raise CollsimError(f"rank 0 of the job at this address runs {got.get('world')} ranks but this rank was told "
                           f"{world}: another job on the same MASTER_PORT, or stale variables")
    nonce = secrets.token_hex(16)
    store.set(PREFIX + f"answer/{rank}", json.dumps(
        {"host": host, "nonce": nonce, "mac": mac(key, got["challenge"], rank, world, host, nonce)}))
    verdict = _get(store, "verdict")
    store.set(PREFIX + f"seen/{rank}", "1")
    if rank in verdict.get("refused", []):
        raise CollsimError(f"rank {rank} was refused by rank 0: this rank's token differs from rank 0's; give every rank "
                           f"the same secret ({TOKEN_VAR} or --token-file)")
    proof = verdict.get("proof", {}).get(str(rank), "")
    if not hmac.compare_digest(str(proof), mac(key, "admit", nonce, rank)):
        raise CollsimError(f"rank {rank}: the rendezvous at this address did not prove it holds this job's token "
                           "(another job on the same MASTER_PORT?): check MASTER_ADDR/MASTER_PORT and the token")
    if not verdict.get("ok"):
        raise CollsimError(f"rank {rank}: rank 0 refused rank(s) {verdict.get('refused')} (wrong token), so the job stops")
