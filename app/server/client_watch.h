// Whether the client of a request is still there. cpp-httplib 0.11 (Debian 12's) tells a
// handler neither its socket nor when the peer closed it, and a write to a closed socket may
// still succeed once, so a generation would run on for nothing until its next writes fail.
// ClientWatch finds the request's socket once (the one of this process whose peer is the
// request's remote address and port) and then peeks at it: an orderly close or a reset means
// the client has gone, and its generation is cancelled at once.
//
// Thread-safety: one per request, used by the thread that serves it.
#pragma once

#include <string>

namespace powerhouse::server {

class ClientWatch {
public:
    ClientWatch(const std::string& remote_addr, int remote_port);
    // True once the client has closed or reset the connection. False when unknown (its
    // socket was not found): the writes then tell.
    bool gone() const;
    // Ends the response: no more bytes go to the client, which reads the end of the stream
    // (a body with neither a length nor chunks, to an HTTP/1.0 client, ends only so).
    // Nothing when the socket was not found.
    void end_response() const;

private:
    int fd_ = -1;
};

}  // namespace powerhouse::server
