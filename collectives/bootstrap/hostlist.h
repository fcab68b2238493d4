// defines: Slurm's compact list syntaxes as pure functions: hostlists (SLURM_JOB_NODELIST,
// "gpu[01-03,07],cpu5") and task counts per node (SLURM_TASKS_PER_NODE, "2(x3),1").
#pragma once
#include <string>
#include <vector>

namespace dp {

// Expands a Slurm hostlist in order. Items are separated by commas outside brackets (or
// whitespace); a bracket holds comma-separated numbers and ranges "lo-hi", zero-padded to the
// width of lo when lo has a leading zero ("[08-10]" -> 08 09 10, "[8-10]" -> 8 9 10); text may
// follow a bracket ("n[1-2]-ib") and an item may hold several brackets ("r[1-2]n[1-2]" -> r1n1
// r1n2 r2n1 r2n2). UserError naming the list and the problem when malformed or larger than
// 1,000,000 hosts.
std::vector<std::string> expand_hostlist(const std::string& list);

// Expands SLURM_TASKS_PER_NODE: "2(x3),1" -> {2, 2, 2, 1}. UserError when malformed.
std::vector<int> expand_tasks_per_node(const std::string& spec);

}  // namespace dp
