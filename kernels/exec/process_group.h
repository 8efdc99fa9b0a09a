// The processes of a real execution (and of a distributed sweep, cli/sweep_transport.h): one
// process (threads drive its GPUs), or the processes of an MPI job started by mpirun (OpenMPI),
// one or more GPUs each. MPI is initialised only when the environment says a launcher started
// this process (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK), so a plain `trainsim execute` never
// touches MPI. Only the C API of MPI is used, and only in the shared module libtrainsim_mpi.so
// (process_group_mpi.cpp), which make_process_group loads with dlopen when a launcher started
// the process: no other command maps the MPI libraries.
//
// The executor needs three things from the group: how many processes and which one this is
// (rank → GPU mapping), the communicator ids made by process 0 (broadcast), and every process's
// measures (all-gather). A build without MPI refuses to run as one of several processes.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace trainsim::kexec {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int index() const = 0;  // 0 .. count-1
  virtual int count() const = 0;
  /// Index of this process among those on its machine (OMPI_COMM_WORLD_LOCAL_RANK; 0 alone).
  virtual int local_index() const = 0;
  /// Process 0's `bytes` to every process.
  virtual void broadcast(std::string& bytes) = 0;
  /// Every process's `mine`, in process order, on every process.
  virtual std::vector<std::string> allgather(const std::string& mine) = 0;
  /// Every process's `mine`, in process order, on process 0; the others get an empty vector.
  virtual std::vector<std::string> gather(const std::string& mine) {
    std::vector<std::string> all = allgather(mine);
    if (index() != 0) all.clear();
    return all;
  }
  /// Ends every process of the job after an error on this one (a no-op alone).
  virtual void abort(int exit_code) = 0;
};

/// This process alone.
std::unique_ptr<ProcessGroup> single_process();
/// The MPI job when started by mpirun, else single_process(). Throws Error(kInput) when started
/// by a launcher but built without MPI.
std::unique_ptr<ProcessGroup> make_process_group();
/// Whether this build has MPI.
bool have_mpi();
/// Whether an MPI launcher started this process (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK set).
bool launched_by_mpi();
/// File name of the MPI module and the function it exports: `ProcessGroup* NAME(void)` (MPI
/// initialised; the caller owns the object).
inline constexpr const char* kMpiModuleFile = "libtrainsim_mpi.so";
inline constexpr const char* kMpiEntrySymbol = "trainsim_mpi_process_group";

}  // namespace trainsim::kexec
