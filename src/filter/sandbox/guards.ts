/**
 * Language-level guards: a second layer on top of the OS layers (netns, uid, rlimits), and the only
 * network barrier where no network namespace can be created. They are best effort (a determined
 * program can get around them through ctypes / native code), which is why they are never the only
 * layer for process and memory limits.
 *
 * Python: a runner script installs a `sys.addaudithook` hook, then executes the program as
 * `__main__`. Refused: process creation (fork, exec*, spawn*, system, subprocess), sockets
 * (connect, bind, sendto), ctypes, signals to other processes, and any write / create / delete /
 * rename / chmod outside the sandbox directory.
 *
 * JavaScript: node's permission model (`--experimental-permission --allow-fs-read=*
 * --allow-fs-write=<dir>`) refuses child processes, worker threads, native addons and writes outside
 * the directory; a `--require` preload additionally makes every socket connect / listen / UDP send
 * throw and removes `fetch` / `WebSocket`.
 */

export const PYTHON_GUARD_FILE = '_arbor_guard.py';
export const JS_GUARD_FILE = '_arbor_guard.cjs';

export const PYTHON_GUARD = String.raw`
import sys, os
def _arbor_install(root):
    root = os.path.realpath(root)
    allowed_devices = ('/dev/null', '/dev/stdout', '/dev/stderr', '/dev/tty')
    blocked = {
        'os.fork', 'os.forkpty', 'os.system', 'os.exec', 'os.posix_spawn', 'os.spawn',
        'subprocess.Popen', 'pty.spawn', 'socket.connect', 'socket.bind', 'socket.sendto',
        'socket.sendmsg', 'ctypes.dlopen', 'ctypes.dlsym', 'ctypes.cdata', 'ctypes.call_function',
        'os.killpg', 'os.setuid', 'os.setgid', 'os.chroot', 'os.unshare', 'os.setns',
    }
    path_events = {
        'os.remove': 2, 'os.rename': 2, 'os.mkdir': 1, 'os.rmdir': 1, 'os.chmod': 1, 'os.chown': 1,
        'os.symlink': 2, 'os.link': 2, 'os.truncate': 1, 'os.utime': 1, 'os.chflags': 1,
        'os.lchflags': 1, 'os.mkfifo': 1, 'os.mknod': 1, 'shutil.rmtree': 1, 'shutil.move': 2,
        'shutil.copyfile': 2, 'shutil.copytree': 2,
    }
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    realpath, join, isabs, fspath, getcwd, getpid = os.path.realpath, os.path.join, os.path.isabs, os.fspath, os.getcwd, os.getpid
    def inside(p):
        if isinstance(p, int):
            return True
        try:
            p = fspath(p)
            if isinstance(p, bytes):
                p = p.decode('utf-8', 'surrogateescape')
            full = p if isabs(p) else join(getcwd(), p)
            if full in allowed_devices:
                return True
            real = realpath(full)
            return real == root or real.startswith(root + '/')
        except Exception:
            return False
    def deny(what):
        raise PermissionError('sandbox: ' + what + ' is not allowed')
    def hook(event, args):
        if event in blocked:
            deny(event)
        if event == 'os.kill':
            if args and args[0] not in (0, getpid()):
                deny('os.kill of another process')
            return
        if event == 'open':
            path, mode, flags = (tuple(args) + (None, None, 0))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in 'wax+')) or (isinstance(flags, int) and flags & write_flags)
            if writing and not inside(path):
                deny('writing ' + repr(path))
            return
        n = path_events.get(event)
        if n:
            for p in list(args)[:n]:
                if p is not None and not inside(p):
                    deny(event + ' on ' + repr(p))
    sys.addaudithook(hook)

_arbor_install(os.path.dirname(os.path.abspath(__file__)))
del _arbor_install
_arbor_main = sys.argv[1]
sys.argv = sys.argv[1:]
with open(_arbor_main, 'rb') as _arbor_f:
    _arbor_code = compile(_arbor_f.read(), _arbor_main, 'exec')
_arbor_globals = {'__name__': '__main__', '__file__': _arbor_main, '__builtins__': __builtins__}
del _arbor_f, _arbor_main
exec(_arbor_code, _arbor_globals)
`;

export const JS_GUARD = String.raw`'use strict';
{
  const net = require('net');
  const dgram = require('dgram');
  const deny = (what) => () => {
    const error = new Error('sandbox: ' + what + ' is not allowed');
    error.code = 'ERR_SANDBOX_DENIED';
    throw error;
  };
  net.Socket.prototype.connect = deny('network connection');
  net.Server.prototype.listen = deny('listening on a socket');
  net.connect = net.createConnection = deny('network connection');
  dgram.Socket.prototype.send = deny('sending a datagram');
  dgram.Socket.prototype.bind = deny('binding a datagram socket');
  dgram.Socket.prototype.connect = deny('network connection');
  for (const name of ['fetch', 'WebSocket', 'EventSource']) {
    try { delete globalThis[name]; } catch {}
  }
}
`;
