#include "collectives/ring/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <fmt/format.h>

namespace dp::ring {
namespace {

bool is_virtual_bridge(const std::string& name) {
  for (const char* p : {"docker", "virbr", "veth", "br-"})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

// gethostname()'s first IPv4 address, "" when it does not resolve.
std::string resolve_host_name(std::string* name_out) {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  *name_out = name;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &res) != 0 || !res) return "";
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
  freeaddrinfo(res);
  return buf;
}

}  // namespace

std::vector<NetInterface> host_interfaces() {
  std::vector<NetInterface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {0};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    out.push_back({i->ifa_name, buf, (i->ifa_flags & IFF_UP) != 0, (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  freeifaddrs(list);
  return out;
}

bool is_loopback_ipv4(const std::string& address) { return address.rfind("127.", 0) == 0; }

std::string pick_interface_address(const std::vector<NetInterface>& interfaces) {
  for (bool bridges : {false, true})
    for (const NetInterface& i : interfaces)
      if (i.up && !i.loopback && !is_loopback_ipv4(i.address) && is_virtual_bridge(i.name) == bridges)
        return i.address;
  return "";
}

std::string host_ipv4_address(std::string* why) {
  std::string name;
  const std::string by_name = resolve_host_name(&name);
  if (!by_name.empty() && !is_loopback_ipv4(by_name)) {
    if (why) *why = fmt::format("the address of host name '{}'", name);
    return by_name;
  }
  const std::vector<NetInterface> ifs = host_interfaces();
  const std::string by_if = pick_interface_address(ifs);
  if (why && !by_if.empty()) {
    std::string ifname;
    for (const auto& i : ifs)
      if (i.address == by_if) ifname = i.name;
    *why = fmt::format("host name '{}' {}; the address of interface {}", name,
                       by_name.empty() ? "does not resolve" : "resolves to loopback " + by_name, ifname);
  }
  return by_if;
}

}  // namespace dp::ring
