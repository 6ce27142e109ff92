"""A scripted Kafka-protocol broker for unit tests: the refusals a real cluster gives.

The development broker (tansu) has no ACLs and never refuses CreateTopics, so the failures an
operator meets on a locked-down cluster (a principal without ACLs on the topic, the cluster or
the transactional id; a topic that is missing and may not be created) cannot be produced with
it. This loopback server answers the few requests kafka-python's admin client and producer send
with the error codes a test scripts. It speaks the wire protocol through kafka-python's own
message classes (no hand-packed bytes), so the clients under test parse real responses.
"""
from __future__ import annotations

import socket
import socketserver
import struct
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import (
    ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, MetadataRequest,
    MetadataResponse)
from kafka.protocol.producer import InitProducerIdRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

# Kafka's error codes the tests script (kafka/errors.py has them all).
UNKNOWN_TOPIC_OR_PARTITION = 3
TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC_ALREADY_EXISTS = 36
INVALID_REPLICATION_FACTOR = 38
POLICY_VIOLATION = 44
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
SASL_AUTHENTICATION_FAILED = 58

# Every API answered, by key. Each is advertised with all the versions kafka-python has classes
# for, since those classes encode and decode them all.
REQUESTS = {cls.API_KEY: cls for cls in (
    ApiVersionsRequest, MetadataRequest, CreateTopicsRequest, FindCoordinatorRequest,
    InitProducerIdRequest, SaslHandshakeRequest, SaslAuthenticateRequest)}


@dataclass
class Script:
    """How the broker behaves. A topic with an error in `topic_errors` is left out of
    all-topic listings and answered with its error when named, as Kafka does for a topic the
    principal may not describe; a named topic not in `topics` is unknown (auto-creation off)."""

    topics: Dict[str, int] = field(default_factory=dict)  # existing topic -> partitions
    topic_errors: Dict[str, int] = field(default_factory=dict)  # Metadata, per topic
    create_errors: Dict[str, Tuple[int, Optional[str]]] = field(default_factory=dict)  # code, why
    coordinator_error: int = 0  # FindCoordinator (the transaction coordinator)
    init_producer_id_error: int = 0
    sasl_error: Optional[Tuple[int, str]] = None  # SaslAuthenticate refuses with it


class ScriptedBroker:
    """A one-broker cluster (node 0) on 127.0.0.1; use as a context manager."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: List[str] = []  # the names of the requests answered, in order
        self.sasl_tokens: List[bytes] = []  # what the clients authenticated with
        self._server = _Server(("127.0.0.1", 0), _Connection)
        self._server.broker = self
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="scripted-broker", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def connections(self) -> int:
        """Client connections still open."""
        return len(self._server.open_sockets)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> "ScriptedBroker":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        for sock in list(self._server.open_sockets):  # ends the connections' threads
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # closed meanwhile
                pass
        self._server.server_close()  # joins them
        self._thread.join()

    def answer(self, frame: bytes) -> bytes:
        api_key, version = struct.unpack_from(">hh", frame)
        if api_key not in REQUESTS:  # the connection closes; the traceback says what to add
            raise NotImplementedError(f"the scripted broker does not answer API key {api_key}")
        request = REQUESTS[api_key].decode(frame, version=version, header=True)
        self.requests.append(request.name)
        fields = getattr(self, "_" + request.name)(request)
        response = request.header.get_response_class()(**fields)
        response.with_header(correlation_id=request.header.correlation_id)
        return response.encode(header=True, framed=True)

    def _node(self) -> Dict[str, object]:
        return {"node_id": 0, "host": "127.0.0.1", "port": self.port}

    def _ApiVersionsRequest(self, request: ApiVersionsRequest) -> Dict[str, object]:
        # kafka-python asks with its newest version (v4, a flexible request header) before it
        # knows the broker's; ApiVersionsResponse writes the never-flexible header Kafka uses.
        api = ApiVersionsResponse.ApiVersion
        return {"error_code": 0, "api_keys": [api(api_key=key, min_version=0,
                                                  max_version=cls.max_version)
                                              for key, cls in REQUESTS.items()]}

    def _MetadataRequest(self, request: MetadataRequest) -> Dict[str, object]:
        script = self.script
        if request.topics is None:  # all topics: those the principal may describe
            names = [name for name in script.topics if name not in script.topic_errors]
        else:
            names = [topic.name for topic in request.topics]
        topic, partition = MetadataResponse.MetadataResponseTopic, \
            MetadataResponse.MetadataResponseTopic.MetadataResponsePartition
        topics = []
        for name in names:
            error = script.topic_errors.get(name, 0 if name in script.topics
                                            else UNKNOWN_TOPIC_OR_PARTITION)
            partitions = [] if error else [
                partition(error_code=0, partition_index=index, leader_id=0, leader_epoch=0,
                          replica_nodes=[0], isr_nodes=[0], offline_replicas=[])
                for index in range(script.topics[name])]
            topics.append(topic(error_code=error, name=name, is_internal=False,
                                partitions=partitions))
        return {"brokers": [MetadataResponse.MetadataResponseBroker(**self._node())],
                "cluster_id": "scripted", "controller_id": 0, "topics": topics}

    def _CreateTopicsRequest(self, request: CreateTopicsRequest) -> Dict[str, object]:
        results = []
        for topic in request.topics:
            error, message = self.script.create_errors.get(topic.name, (0, None))
            if not error and topic.name in self.script.topics:
                error, message = TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists."
            if not error and not request.validate_only:
                self.script.topics[topic.name] = topic.num_partitions
            results.append({"name": topic.name, "error_code": error, "error_message": message})
        result = request.header.get_response_class().CreatableTopicResult
        return {"topics": [result(**fields) for fields in results]}

    def _FindCoordinatorRequest(self, request: FindCoordinatorRequest) -> Dict[str, object]:
        found = dict(self._node(), error_code=self.script.coordinator_error)
        if request.API_VERSION < 4:  # one key, answered in the top-level fields
            return found
        coordinator = request.header.get_response_class().Coordinator
        return {"coordinators": [coordinator(key=key, **found)
                                 for key in request.coordinator_keys]}

    def _InitProducerIdRequest(self, request: InitProducerIdRequest) -> Dict[str, object]:
        return {"error_code": self.script.init_producer_id_error, "producer_id": 1000,
                "producer_epoch": 0}

    def _SaslHandshakeRequest(self, request: SaslHandshakeRequest) -> Dict[str, object]:
        return {"error_code": 0, "mechanisms": ["PLAIN"]}

    def _SaslAuthenticateRequest(self, request: SaslAuthenticateRequest) -> Dict[str, object]:
        self.sasl_tokens.append(bytes(request.auth_bytes))
        error, message = self.script.sasl_error or (0, None)
        return {"error_code": error, "error_message": message, "auth_bytes": b""}


class _Server(socketserver.ThreadingTCPServer):
    block_on_close = True  # server_close joins the connections' threads

    def __init__(self, *args: object) -> None:
        self.open_sockets: set = set()
        self.broker: Optional[ScriptedBroker] = None
        super().__init__(*args)

    def process_request(self, request: socket.socket, client_address: object) -> None:
        self.open_sockets.add(request)  # before its thread starts: __exit__ finds every one
        super().process_request(request, client_address)


class _Connection(socketserver.BaseRequestHandler):
    """One client connection: framed requests in, framed responses out, in order."""

    def handle(self) -> None:
        try:
            while True:
                size = self._read(4)
                frame = size and self._read(struct.unpack(">i", size)[0])
                if not frame:
                    return  # the client closed the connection (or the broker stops)
                self.request.sendall(self.server.broker.answer(frame))
        except OSError:
            return
        finally:
            self.server.open_sockets.discard(self.request)

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.request.recv(count - len(data))
            if not chunk:
                return b""
            data += chunk
        return data
