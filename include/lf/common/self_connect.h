#pragma once
// TCP "self-connect": a client that dials a local port nobody listens on yet (a rendezvous
// server or store still starting) can be handed that very port as its own ephemeral source
// port, and the kernel's simultaneous open then connects the socket to itself. The client
// would talk to itself (its heartbeats answer its own heartbeats), and the server's later
// bind fails with "address in use". Every client that retries a connect asks this question
// and treats a yes as a refusal.
namespace lf {

// True when the connected socket's local address and port equal its peer's.
bool connected_to_itself(int fd);

}  // namespace lf
