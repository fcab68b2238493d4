// defines: choose_listen_address, the one place that decides which address a listener of this
// process binds and advertises (rank 0's TCP store, the ring's listeners), and interface_ipv4,
// the address of the interface that dist.iface names. Both pure: this machine's interfaces come
// in as data (collectives/ring/interfaces.h reads them); listen_address() is the impure wrapper
// the store and the ring call.
//
// dist.iface is NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME for this project: on a host with several
// networks (a management LAN, a fast fabric, container bridges) it says which one the job uses.
#pragma once
#include <string>
#include <vector>

#include "collectives/ring/interfaces.h"

namespace dp {

enum class Listener { Store, Ring };

struct ListenInputs {
  std::string override_value;  // DPTRAIN_STORE_BIND (store) / DPTRAIN_RING_HOST (ring); "" = unset
  std::string iface;           // dist.iface; "" = unset
  std::string master_addr;     // store: MASTER_ADDR, what the other ranks connect to
  bool all_local = false;      // ring: every rank of the job is on this node
};

struct ListenChoice {
  enum class Source { Override, Interface, MasterAddr, Loopback, HostAddress };
  Source source = Source::HostAddress;
  std::string address;  // "" for HostAddress: the caller asks ring::host_ipv4_address()
  std::string why;      // for the log: "dist.iface = eth0"
};

// Pure. In order: the tunable override (DPTRAIN_STORE_BIND / DPTRAIN_RING_HOST, set by hand for
// NAT and the like); dist.iface's IPv4 address; then the default: the store binds MASTER_ADDR
// itself (never every interface), the ring 127.0.0.1 when every rank is on this node, else this
// host's address (HostAddress). UserError when dist.iface has no address (interface_ipv4), and
// for the store when MASTER_ADDR is a literal address (or localhost) other than dist.iface's: the
// other ranks could not reach a store bound there.
ListenChoice choose_listen_address(Listener which, const ListenInputs& in,
                                   const std::vector<ring::NetInterface>& interfaces);

// Pure: the first IPv4 address of interface `name`. UserError naming dist.iface, the interface
// and the interfaces that exist (with their addresses) when it is unknown, down or has no IPv4
// address.
std::string interface_ipv4(const std::string& name, const std::vector<ring::NetInterface>& interfaces);

// choose_listen_address with this machine's interfaces (read only when dist.iface is set) and,
// for HostAddress, ring::host_ipv4_address(); logs the choice at debug level. UserError when no
// address results (no interface up but loopback), saying which tunable to set.
std::string listen_address(Listener which, const ListenInputs& in);

}  // namespace dp
