#include "collectives/listen_address.h"

#include <arpa/inet.h>

#include "base/error.h"
#include "runtime/log.h"

namespace dp {
namespace {

// "lo 127.0.0.1, eth0 10.213.0.11, eth1 10.0.0.9 (down)"; "none" when empty.
std::string describe(const std::vector<ring::NetInterface>& interfaces) {
  std::string out;
  for (const auto& i : interfaces)
    out += fmt::format("{}{} {}{}", out.empty() ? "" : ", ", i.name, i.address, i.up ? "" : " (down)");
  return out.empty() ? "none" : out;
}

// A numeric IPv4 address, with localhost as 127.0.0.1; "" for a host name (not resolved here:
// the other ranks may resolve it differently from rank 0).
std::string literal_ipv4(const std::string& host) {
  if (host == "localhost") return "127.0.0.1";
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 ? host : "";
}

const char* override_name(Listener which) { return which == Listener::Store ? "DPTRAIN_STORE_BIND" : "DPTRAIN_RING_HOST"; }

}  // namespace

std::string interface_ipv4(const std::string& name, const std::vector<ring::NetInterface>& interfaces) {
  const ring::NetInterface* found = nullptr;
  for (const auto& i : interfaces)
    if (i.name == name && (!found || (i.up && !found->up))) found = &i;
  if (!found)
    DP_THROW_USER("dist.iface = \"{}\": this host has no interface of that name with an IPv4 address [{}]; its "
                  "interfaces: {}. Set dist.iface to one of them, or leave it unset",
                  name, identity_string(), describe(interfaces));
  if (!found->up)
    DP_THROW_USER("dist.iface = \"{}\": interface {} ({}) is down on this host [{}]; bring it up (ip link set {} up) "
                  "or choose another of: {}",
                  name, name, found->address, identity_string(), name, describe(interfaces));
  return found->address;
}

ListenChoice choose_listen_address(Listener which, const ListenInputs& in,
                                   const std::vector<ring::NetInterface>& interfaces) {
  using Source = ListenChoice::Source;
  if (!in.override_value.empty())
    return {Source::Override, in.override_value,
            fmt::format("{}{}", override_name(which), in.iface.empty() ? "" : " (it overrides dist.iface)")};
  if (!in.iface.empty()) {
    const std::string address = interface_ipv4(in.iface, interfaces);
    const std::string master = which == Listener::Store ? literal_ipv4(in.master_addr) : "";
    if (!master.empty() && master != address) {
      std::string owner;
      for (const auto& i : interfaces)
        if (i.address == master) owner = i.name;
      DP_THROW_USER("dist.iface = \"{}\": rank 0's TCP store would listen on {}'s address {}, but MASTER_ADDR is {}, "
                    "where the other ranks look for it [{}]; set MASTER_ADDR to {}{}",
                    in.iface, in.iface, address, in.master_addr, identity_string(), address,
                    owner.empty() ? "" : fmt::format(" or dist.iface to {} (the interface of {})", owner, master));
    }
    return {Source::Interface, address, fmt::format("dist.iface = {}", in.iface)};
  }
  if (which == Listener::Store) return {Source::MasterAddr, in.master_addr, "MASTER_ADDR"};
  if (in.all_local) return {Source::Loopback, "127.0.0.1", "every rank is on this node"};
  return {Source::HostAddress, "", ""};
}

std::string listen_address(Listener which, const ListenInputs& in) {
  // getifaddrs only when dist.iface asks for it: the default path stays as it was.
  const std::vector<ring::NetInterface> interfaces = in.iface.empty() ? std::vector<ring::NetInterface>{}
                                                                       : ring::host_interfaces();
  ListenChoice c = choose_listen_address(which, in, interfaces);
  if (c.source == ListenChoice::Source::HostAddress) {
    c.address = ring::host_ipv4_address(&c.why);
    if (c.address.empty())
      DP_THROW_USER("ring setup [{}]: no address for other hosts to reach this one: {}; no interface is up but "
                    "loopback. Set dist.iface to the interface the job uses (or DPTRAIN_RING_HOST to this host's "
                    "address)",
                    identity_string(),
                    c.why.empty() ? "the host name does not resolve to a non-loopback address" : c.why);
  }
  log::get("coll")->debug("{}: listening on {} ({})", which == Listener::Store ? "TCP store" : "ring", c.address,
                          c.why);
  return c.address;
}

}  // namespace dp
