#pragma once
// Whether an HTTP client is still there. cpp-httplib does not hand handlers their socket, so the
// socket is found among the process's descriptors by the client's address and port (Linux).
#include <string>

namespace tessera::server {

class ClientWatch {
 public:
  ClientWatch(const std::string& remote_addr, int remote_port, int local_port);
  // True once the client has closed its side (or the connection failed).
  bool gone();

 private:
  int fd_ = -1;
};

}  // namespace tessera::server
