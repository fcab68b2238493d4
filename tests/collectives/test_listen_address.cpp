// Tests for collectives/listen_address.h: which address rank 0's store and the ring's listeners
// bind, with and without dist.iface. The end-to-end check (the sockets really bound there, in
// network namespaces) is tests/integration/test_dist_iface.sh.
#include <gtest/gtest.h>

#include "base/error.h"
#include "collectives/listen_address.h"

namespace dp {
namespace {

using Source = ListenChoice::Source;

const std::vector<ring::NetInterface> kIfs = {{"lo", "127.0.0.1", true, true},
                                              {"eth0", "10.213.0.11", true, false},
                                              {"ib0", "192.168.7.3", true, false},
                                              {"eth1", "10.0.0.9", false, false}};  // down

std::string error_of(Listener which, const ListenInputs& in, const std::vector<ring::NetInterface>& ifs = kIfs) {
  try {
    choose_listen_address(which, in, ifs);
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ListenAddress, WithoutIfaceTheDefaultsStay) {
  // The store: MASTER_ADDR itself, never every interface.
  ListenChoice c = choose_listen_address(Listener::Store, {"", "", "10.213.0.11", false}, kIfs);
  EXPECT_EQ(c.source, Source::MasterAddr);
  EXPECT_EQ(c.address, "10.213.0.11");
  c = choose_listen_address(Listener::Store, {"", "", "node17", false}, kIfs);
  EXPECT_EQ(c.address, "node17");
  // The ring: loopback when every rank is here, else the host's address (found by the caller).
  c = choose_listen_address(Listener::Ring, {"", "", "", true}, kIfs);
  EXPECT_EQ(c.source, Source::Loopback);
  EXPECT_EQ(c.address, "127.0.0.1");
  c = choose_listen_address(Listener::Ring, {"", "", "", false}, kIfs);
  EXPECT_EQ(c.source, Source::HostAddress);
  EXPECT_EQ(c.address, "");
}

TEST(ListenAddress, IfaceNamesTheAddressOfBothListeners) {
  ListenChoice c = choose_listen_address(Listener::Ring, {"", "ib0", "", false}, kIfs);
  EXPECT_EQ(c.source, Source::Interface);
  EXPECT_EQ(c.address, "192.168.7.3");
  EXPECT_EQ(c.why, "dist.iface = ib0");
  // Even with every rank on this node (the job asked for that network).
  EXPECT_EQ(choose_listen_address(Listener::Ring, {"", "ib0", "", true}, kIfs).address, "192.168.7.3");
  // The store: MASTER_ADDR as a name is not resolved (other hosts may resolve it differently).
  c = choose_listen_address(Listener::Store, {"", "ib0", "node17-ib", false}, kIfs);
  EXPECT_EQ(c.source, Source::Interface);
  EXPECT_EQ(c.address, "192.168.7.3");
  EXPECT_EQ(choose_listen_address(Listener::Store, {"", "ib0", "192.168.7.3", false}, kIfs).address, "192.168.7.3");
  // An interface with several addresses: its first; a down copy of a name loses to an up one.
  const std::vector<ring::NetInterface> two = {{"eth0", "10.1.0.1", false, false},
                                               {"eth0", "10.1.0.2", true, false},
                                               {"eth0", "10.1.0.3", true, false}};
  EXPECT_EQ(interface_ipv4("eth0", two), "10.1.0.2");
}

TEST(ListenAddress, TheTunablesOverrideIface) {
  ListenChoice c = choose_listen_address(Listener::Store, {"0.0.0.0", "ib0", "10.213.0.11", false}, kIfs);
  EXPECT_EQ(c.source, Source::Override);
  EXPECT_EQ(c.address, "0.0.0.0");
  EXPECT_EQ(c.why, "DPTRAIN_STORE_BIND (it overrides dist.iface)");
  c = choose_listen_address(Listener::Ring, {"10.9.9.9", "", "", true}, kIfs);
  EXPECT_EQ(c.address, "10.9.9.9");
  EXPECT_EQ(c.why, "DPTRAIN_RING_HOST");
  // The override wins before the interface is looked at: a missing one is no error then.
  EXPECT_EQ(choose_listen_address(Listener::Ring, {"10.9.9.9", "nope0", "", false}, kIfs).address, "10.9.9.9");
}

TEST(ListenAddress, AMissingOrDownInterfaceIsAUserErrorListingTheOthers) {
  const std::string id = identity_string();
  EXPECT_EQ(error_of(Listener::Ring, {"", "eth9", "", false}),
            "dist.iface = \"eth9\": this host has no interface of that name with an IPv4 address [" + id +
                "]; its interfaces: lo 127.0.0.1, eth0 10.213.0.11, ib0 192.168.7.3, eth1 10.0.0.9 (down). Set "
                "dist.iface to one of them, or leave it unset");
  EXPECT_EQ(error_of(Listener::Store, {"", "eth1", "10.0.0.9", false}),
            "dist.iface = \"eth1\": interface eth1 (10.0.0.9) is down on this host [" + id +
                "]; bring it up (ip link set eth1 up) or choose another of: lo 127.0.0.1, eth0 10.213.0.11, ib0 "
                "192.168.7.3, eth1 10.0.0.9 (down)");
  EXPECT_EQ(error_of(Listener::Ring, {"", "eth0", "", false}, {}),
            "dist.iface = \"eth0\": this host has no interface of that name with an IPv4 address [" + id +
                "]; its interfaces: none. Set dist.iface to one of them, or leave it unset");
}

TEST(ListenAddress, AStoreOnIfaceThatMasterAddrDoesNotPointAtIsAUserError) {
  const std::string id = identity_string();
  EXPECT_EQ(error_of(Listener::Store, {"", "ib0", "10.213.0.11", false}),
            "dist.iface = \"ib0\": rank 0's TCP store would listen on ib0's address 192.168.7.3, but MASTER_ADDR is "
            "10.213.0.11, where the other ranks look for it [" + id +
                "]; set MASTER_ADDR to 192.168.7.3 or dist.iface to eth0 (the interface of 10.213.0.11)");
  EXPECT_EQ(error_of(Listener::Store, {"", "eth0", "localhost", false}),
            "dist.iface = \"eth0\": rank 0's TCP store would listen on eth0's address 10.213.0.11, but MASTER_ADDR is "
            "localhost, where the other ranks look for it [" + id +
                "]; set MASTER_ADDR to 10.213.0.11 or dist.iface to lo (the interface of 127.0.0.1)");
  // Not for the ring: each rank's own interface has its own address.
  EXPECT_EQ(choose_listen_address(Listener::Ring, {"", "ib0", "10.213.0.11", false}, kIfs).address, "192.168.7.3");
}

TEST(ListenAddress, ThisMachinesLoopbackByName) {
  // The impure wrapper reads the real interfaces: every Linux machine has lo at 127.0.0.1.
  EXPECT_EQ(listen_address(Listener::Ring, {"", "lo", "", false}), "127.0.0.1");
  EXPECT_EQ(listen_address(Listener::Store, {"", "lo", "127.0.0.1", false}), "127.0.0.1");
  EXPECT_THROW(listen_address(Listener::Ring, {"", "dptrain-no-such-if", "", false}), UserError);
}

}  // namespace
}  // namespace dp
