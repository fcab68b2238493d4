// defines: this machine's IPv4 interfaces (host_interfaces) and the address a ring listener uses
// when the launcher gives none (host_ipv4_address): the host name's address when it resolves to a
// non-loopback IPv4 address, else the first interface that is up (pick_interface_address, pure).
//
// Why not the host name alone: on many machines it does not resolve (a test host in a network
// namespace, a container without DNS) or resolves to loopback (Debian's /etc/hosts maps it to
// 127.0.1.1), and a listener there is unreachable from other hosts. NCCL falls back the same way
// (the first interface that is up, skipping loopback and container bridges).
#pragma once
#include <string>
#include <vector>

namespace dp::ring {

struct NetInterface {
  std::string name;     // "eth0"
  std::string address;  // "10.213.0.11"
  bool up = false;
  bool loopback = false;
};

// Every IPv4 address of this machine's interfaces, in getifaddrs(3) order.
std::vector<NetInterface> host_interfaces();

// Pure: the address of the first interface that is up and not loopback, preferring any other to
// container and virtual bridges (docker*, virbr*, veth*, br-*); "" when there is none.
std::string pick_interface_address(const std::vector<NetInterface>& interfaces);

// Pure: true for 127.0.0.0/8.
bool is_loopback_ipv4(const std::string& address);

// The address other hosts reach this one at: gethostname()'s IPv4 address unless it does not
// resolve or is loopback, else pick_interface_address(host_interfaces()); "" when neither gives
// one. `why` (may be null) says which, for the log.
std::string host_ipv4_address(std::string* why = nullptr);

}  // namespace dp::ring
