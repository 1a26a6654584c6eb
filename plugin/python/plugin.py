#!/usr/bin/python3
"""A virtual-kubelet provider plugin in Python: each pod's containers run as
local processes (command + args, env, workingDir), their output in log
files with a timestamp per line. It serves the contract of
proto/provider/v1alpha1 on a unix socket for the daemon's --provider grpc:
lifecycle, pushed pod status, logs, exec and port-forward (README.md).

Pods travel as core/v1 Pods in the Kubernetes protobuf encoding (the
generated Go Marshal, no envelope), decoded with the stubs of gen.sh.
"""
import argparse
import contextlib
import datetime
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("VK_PLUGIN_STUBS", os.path.join(HERE, "gen")))

import grpc  # noqa: E402
from k8s_io.api.core.v1 import generated_pb2 as core  # noqa: E402
from provider.v1alpha1 import provider_pb2 as pb  # noqa: E402
from provider.v1alpha1 import provider_pb2_grpc as pbgrpc  # noqa: E402

PROTOCOL_VERSION = 1
# The header a stream sends once it is open (plugin/wire.OpenedHeader).
OPENED = (("vk-stream-opened", "1"),)
# What a container's environment starts from, as in a container image.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# How long DeletePod waits for SIGTERM before SIGKILL: under the daemon's
# call timeout, whatever the pod's grace period.
MAX_GRACE = 5.0


class Refused(Exception):
    """An error the plugin answers with a gRPC status code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Container:
    """One container of a pod: a process group whose output goes, line by
    line and timestamped, to a log file."""

    def __init__(self, pod, spec, on_exit):
        self.name = spec.name
        self.image = spec.image
        self.log = os.path.join(pod.dir, spec.name + ".log")
        self.env = {"PATH": DEFAULT_PATH, "HOSTNAME": pod.name}
        self.env.update((e.name, e.value) for e in spec.env)
        self.cwd = spec.workingDir or pod.dir
        self.started = time.time()
        self.finished = self.code = None
        self.reason = self.message = ""
        self.proc = None
        argv = list(spec.command) + list(spec.args)
        open(self.log, "ab").close()
        try:
            self.proc = subprocess.Popen(argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            self.exited(128, "StartError", "%s: %s" % (argv[0], e.strerror))
            return
        threading.Thread(target=self.collect, args=(on_exit,), daemon=True).start()

    def collect(self, on_exit):
        """Copies the output to the log, then records the exit."""
        with open(self.log, "ab", buffering=0) as log:
            for line in iter(self.proc.stdout.readline, b""):
                log.write(now_rfc3339().encode() + b" " + line + (b"" if line.endswith(b"\n") else b"\n"))
        code = self.proc.wait()
        if code < 0:  # killed by a signal, as a shell reports it
            self.exited(128 - code, "Error", "killed by signal %d" % -code)
        else:
            self.exited(code, "Completed" if code == 0 else "Error", "")
        on_exit()

    def exited(self, code, reason, message):
        self.finished, self.code, self.reason, self.message = time.time(), code, reason, message

    def signal(self, sig):
        if self.proc is not None and self.finished is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def status(self):
        s = core.ContainerStatus(name=self.name, image=self.image, imageID=self.image, restartCount=0)
        if self.proc is not None:
            s.containerID = "process://%d" % self.proc.pid
        if self.finished is None:
            s.state.running.startedAt.seconds = int(self.started)
            s.ready = s.started = True
        else:
            t = s.state.terminated
            t.exitCode, t.reason, t.message = self.code, self.reason, self.message
            t.startedAt.seconds = int(self.started)
            t.finishedAt.seconds = int(self.finished)
            s.ready = s.started = False
        return s


class Pod:
    """A pod and its containers' processes."""

    def __init__(self, pod, root, on_change):
        if not pod.metadata.name:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "pod without a name")
        self.pod = pod
        self.name = pod.metadata.name
        self.deleted = False
        if pod.spec.initContainers:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "pod %s: init containers are not supported by this plugin" % self.name)
        for c in pod.spec.containers:
            if not c.command:
                raise Refused(grpc.StatusCode.INVALID_ARGUMENT,
                              "pod %s: container %s has no command; this plugin runs command and args as a local process, "
                              "it does not run images" % (self.name, c.name))
        self.dir = tempfile.mkdtemp(prefix="%s_%s_" % (pod.metadata.namespace, self.name), dir=root)
        self.started = time.time()
        # A deleted pod's exits are reported once, by the delete.
        self.containers = [Container(self, c, lambda: self.deleted or on_change(self)) for c in pod.spec.containers]

    def container(self, name):
        for c in self.containers:
            if c.name == name or not name and len(self.containers) == 1:
                return c
        raise Refused(grpc.StatusCode.NOT_FOUND, "container %r is not in pod %s/%s" % (name, self.pod.metadata.namespace, self.name))

    def status(self):
        s = core.PodStatus()
        codes = [c.code for c in self.containers]
        if any(code is None for code in codes):
            s.phase = "Running"
        else:
            s.phase = "Succeeded" if all(code == 0 for code in codes) else "Failed"
        s.hostIP = s.podIP = "127.0.0.1"
        s.podIPs.add(ip="127.0.0.1")
        s.startTime.seconds = int(self.started)
        s.containerStatuses.extend(c.status() for c in self.containers)
        return s

    def with_status(self):
        p = core.Pod()
        p.CopyFrom(self.pod)
        p.status.CopyFrom(self.status())
        return p

    def stop(self, grace):
        """SIGTERM, SIGKILL after grace seconds; returns once all exited."""
        for c in self.containers:
            c.signal(signal.SIGTERM)
        deadline = time.time() + grace
        for c in self.containers:
            if c.proc is None:
                continue
            try:
                c.proc.wait(max(0.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                c.signal(signal.SIGKILL)
                c.proc.wait()
            while c.finished is None:  # collect() records the exit
                time.sleep(0.01)
        shutil.rmtree(self.dir, ignore_errors=True)


class Provider(pbgrpc.PluginServicer, pbgrpc.LifecycleServicer, pbgrpc.NodeServicer, pbgrpc.KubeletServicer):
    """The contract's four services over the pods of this process."""

    def __init__(self, root, pods_capacity):
        self.root = root
        self.pods_capacity = pods_capacity
        self.lock = threading.Lock()
        self.pods = {}  # (namespace, name) -> Pod
        self.watchers = set()  # one queue.Queue per WatchPods stream

    def publish(self, pod):
        data = pod.with_status().SerializeToString()
        with self.lock:
            for q in self.watchers:
                q.put(data)

    def get(self, namespace, name):
        with self.lock:
            pod = self.pods.get((namespace, name))
        if pod is None:
            raise Refused(grpc.StatusCode.NOT_FOUND, "pod %s/%s is not in this plugin" % (namespace, name))
        return pod

    def Handshake(self, request, context):
        caps = [pb.CAPABILITY_POD_NOTIFIER, pb.CAPABILITY_LOGS, pb.CAPABILITY_EXEC, pb.CAPABILITY_PORT_FORWARD]
        return pb.HandshakeResponse(protocol_version=PROTOCOL_VERSION, capabilities=caps, name="python-processes")

    def CreatePod(self, request, context):
        spec = decode_pod(request.pod)
        key = (spec.metadata.namespace, spec.metadata.name)
        with self.lock:
            old = self.pods.get(key)
        if old is not None and old.pod.metadata.uid == spec.metadata.uid:
            return pb.PodResponse()  # a retry: the pod runs already
        if old is not None:
            self.delete(old)
        pod = Pod(spec, self.root, self.publish)
        with self.lock:
            self.pods[key] = pod
        self.publish(pod)
        return pb.PodResponse()

    def UpdatePod(self, request, context):
        spec = decode_pod(request.pod)
        pod = self.get(spec.metadata.namespace, spec.metadata.name)
        pod.pod.metadata.CopyFrom(spec.metadata)  # labels, annotations; containers keep running
        return pb.PodResponse()

    def DeletePod(self, request, context):
        spec = decode_pod(request.pod)
        self.delete(self.get(spec.metadata.namespace, spec.metadata.name))
        return pb.PodResponse()

    def delete(self, pod):
        pod.deleted = True
        grace = pod.pod.spec.terminationGracePeriodSeconds if pod.pod.spec.HasField("terminationGracePeriodSeconds") else 30
        pod.stop(min(float(grace), MAX_GRACE))
        with self.lock:
            if self.pods.get((pod.pod.metadata.namespace, pod.name)) is pod:
                del self.pods[(pod.pod.metadata.namespace, pod.name)]
        self.publish(pod)  # its terminal status, every container terminated

    def GetPod(self, request, context):
        return pb.GetPodResponse(pod=self.get(request.namespace, request.name).with_status().SerializeToString())

    def GetPodStatus(self, request, context):
        return pb.GetPodStatusResponse(status=self.get(request.namespace, request.name).status().SerializeToString())

    def ListPods(self, request, context):
        with self.lock:
            pods = list(self.pods.values())
        return pb.ListPodsResponse(pods=[p.with_status().SerializeToString() for p in pods])

    def WatchPods(self, request, context):
        q = queue.Queue()
        with self.lock:
            self.watchers.add(q)
        context.add_callback(lambda: self.unwatch(q))
        for data in self.ListPods(None, context).pods:
            yield pb.PodEvent(pod=data)
        while context.is_active():
            try:
                yield pb.PodEvent(pod=q.get(timeout=1))
            except queue.Empty:
                pass

    def unwatch(self, q):
        with self.lock:
            self.watchers.discard(q)

    def Ping(self, request, context):
        return pb.PingResponse()

    def GetNode(self, request, context):
        n = core.Node()
        n.metadata.labels["vkubelet.io/plugin"] = "python-processes"
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        for resource, quantity in (("cpu", str(os.cpu_count())), ("memory", str(memory)), ("pods", str(self.pods_capacity))):
            n.status.capacity[resource].string = quantity
        n.status.conditions.add(type="Ready", status="True", reason="PluginReady", message="the Python plugin runs pods as local processes")
        n.status.nodeInfo.operatingSystem = "linux"
        return pb.GetNodeResponse(node=n.SerializeToString())

    def ContainerLogs(self, request, context):
        c = self.get(request.namespace, request.pod).container(request.container)
        if request.previous:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "previous terminated container %r not found: this plugin never restarts containers" % c.name)
        since = request.since_time_unix_nano / 1e9 if request.since_time_unix_nano else 0
        if request.since_seconds:
            since = time.time() - request.since_seconds
        context.send_initial_metadata(OPENED)
        budget = request.limit_bytes or -1
        with open(c.log, "rb") as f:
            lines = [ln for ln in f.read().splitlines(keepends=True) if not since or line_time(ln) >= since]
            if request.tail >= 0:
                lines = lines[max(0, len(lines) - request.tail):] if request.tail else []
            while True:
                for ln in lines:
                    text = ln if request.timestamps else ln.split(b" ", 1)[-1]
                    if budget >= 0:
                        text, budget = text[:budget], budget - len(text[:budget])
                    if text:
                        yield pb.ContainerLogsChunk(data=text)
                    if budget == 0:
                        return
                if not request.follow or not context.is_active():
                    return
                done = c.finished is not None
                time.sleep(0.1)
                lines = f.readlines()
                if done and not lines:
                    return

    def Exec(self, request_iterator, context):
        first = next(request_iterator, None)
        if first is None or not first.HasField("start"):
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "the first message of a session must be its start")
        start = first.start
        if not start.command:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "Exec: the start message names no command")
        c = self.get(start.namespace, start.pod).container(start.container)
        if c.finished is not None:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "container %s is not running" % c.name)
        pipe = subprocess.PIPE
        try:
            proc = subprocess.Popen(list(start.command), env=c.env, cwd=c.cwd,
                                    stdin=pipe if start.stdin else subprocess.DEVNULL,
                                    stdout=pipe if start.stdout else subprocess.DEVNULL,
                                    stderr=pipe if start.stderr else subprocess.DEVNULL)
        except OSError as e:
            yield pb.StreamResponse(exit=pb.Exit(code=127, message="%s: %s" % (start.command[0], e.strerror)))
            return
        out = queue.Queue()
        pumps = [threading.Thread(target=pump, args=(f, field, out), daemon=True)
                 for f, field in ((proc.stdout, "stdout"), (proc.stderr, "stderr")) if f is not None]
        for t in pumps:
            t.start()
        if proc.stdin is not None:
            threading.Thread(target=feed_stdin, args=(request_iterator, proc.stdin), daemon=True).start()
        for _ in pumps:
            for msg in iter(out.get, None):
                yield msg
        code = proc.wait()
        code = 128 - code if code < 0 else code
        yield pb.StreamResponse(exit=pb.Exit(code=code, message="exit code %d" % code if code else ""))

    def PortForward(self, request_iterator, context):
        first = next(request_iterator, None)
        if first is None or not first.HasField("start"):
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "the first message of a port-forward must be its start")
        self.get(first.start.namespace, first.start.pod)
        try:
            conn = socket.create_connection(("127.0.0.1", first.start.port), timeout=10)
        except OSError as e:
            raise Refused(grpc.StatusCode.UNAVAILABLE, "port %d of pod %s: %s" % (first.start.port, first.start.pod, e.strerror))
        conn.settimeout(None)
        context.add_callback(conn.close)
        threading.Thread(target=feed_socket, args=(request_iterator, conn), daemon=True).start()
        for data in iter(lambda: recv(conn), b""):
            yield pb.PortForwardResponse(data=data)


def line_time(line):
    """The time a log line was written, from its RFC 3339 prefix."""
    try:
        stamp = line.split(b" ", 1)[0].decode()
        return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        return 0


def pump(f, field, out):
    """Sends what a process writes to f as field messages, then None."""
    for data in iter(lambda: f.read1(32 * 1024), b""):
        out.put(pb.StreamResponse(**{field: data}))
    out.put(None)


def feed_stdin(requests, stdin):
    try:
        for msg in requests:
            if msg.HasField("stdin"):
                stdin.write(msg.stdin)
                stdin.flush()
            elif msg.HasField("stdin_eof"):
                break
    except (OSError, grpc.RpcError):
        pass  # the command ended or the client went away
    finally:
        with contextlib.suppress(OSError):
            stdin.close()


def feed_socket(requests, conn):
    try:
        for msg in requests:
            if msg.HasField("data"):
                conn.sendall(msg.data)
            elif msg.HasField("close"):
                break
        conn.shutdown(socket.SHUT_WR)
    except (OSError, grpc.RpcError):
        pass


def recv(conn):
    try:
        return conn.recv(32 * 1024)
    except OSError:
        return b""


def decode_pod(data):
    if not data:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "empty pod bytes, want a core/v1 Pod in the Kubernetes protobuf encoding")
    pod = core.Pod()
    try:
        pod.ParseFromString(data)
    except Exception as e:  # the protobuf runtime's DecodeError and others
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "malformed core/v1 Pod (%d bytes): %s" % (len(data), e))
    return pod


class Refusals(grpc.ServerInterceptor):
    """Turns a Refused raised by a handler into its gRPC status."""

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None:
            return None
        kinds = (("unary_unary", grpc.unary_unary_rpc_method_handler), ("unary_stream", grpc.unary_stream_rpc_method_handler),
                 ("stream_stream", grpc.stream_stream_rpc_method_handler))
        for kind, make in kinds:
            fn = getattr(handler, kind)
            if fn is not None:
                wrap = refusing_stream if handler.response_streaming else refusing
                return make(wrap(fn), handler.request_deserializer, handler.response_serializer)
        return handler


def refusing(fn):
    def call(request, context):
        try:
            return fn(request, context)
        except Refused as e:
            context.abort(e.code, str(e))
    return call


def refusing_stream(fn):
    def call(request, context):
        try:
            yield from fn(request, context)
        except Refused as e:
            context.abort(e.code, str(e))
    return call


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, help="unix:///path/to.sock")
    parser.add_argument("--root", help="where pods' directories and logs go (a new temporary directory if not set)")
    parser.add_argument("--pods", type=int, default=110, help="the node's pod capacity")
    args = parser.parse_args()
    if not args.listen.startswith("unix:///"):
        parser.error("--listen %r: want unix:///path/to.sock" % args.listen)
    path = args.listen[len("unix://"):]
    if os.path.exists(path):
        os.unlink(path)  # a socket left by an earlier run
    root = args.root or tempfile.mkdtemp(prefix="vk-python-plugin-")
    os.makedirs(root, exist_ok=True)
    provider = Provider(root, args.pods)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64), interceptors=[Refusals()],
                         options=[("grpc.max_receive_message_length", 64 << 20)])
    pbgrpc.add_PluginServicer_to_server(provider, server)
    pbgrpc.add_LifecycleServicer_to_server(provider, server)
    pbgrpc.add_NodeServicer_to_server(provider, server)
    pbgrpc.add_KubeletServicer_to_server(provider, server)
    if server.add_insecure_port(args.listen) == 0:
        sys.exit("cannot listen on %s" % args.listen)
    server.start()
    print("serving provider python-processes on %s, pods under %s" % (args.listen, root), file=sys.stderr, flush=True)
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    server.stop(2)
    # The pods' processes do not outlive the plugin: nothing would report them.
    with provider.lock:
        pods = list(provider.pods.values())
    for pod in pods:
        pod.stop(MAX_GRACE)
    if not args.root:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
