// ProcessGroup over MPI: the MPI module libtrainsim_mpi.so (built when CMake finds MPI), loaded by
// make_process_group (process_group_client.cpp) only when a launcher started the process.
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "kernels/exec/process_group.h"

namespace trainsim::kexec {
namespace {

class Mpi : public ProcessGroup {
 public:
  Mpi() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      // SERIALIZED: `calibrate nccl` meets the other processes from whichever of its GPU threads
      // arrives last at the local barrier (one at a time, never concurrently).
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      owner_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    local_ = local ? std::atoi(local) : 0;
  }
  ~Mpi() override {
    if (owner_) MPI_Finalize();
  }
  Mpi(const Mpi&) = delete;
  Mpi& operator=(const Mpi&) = delete;

  int index() const override { return rank_; }
  int count() const override { return size_; }
  int local_index() const override { return local_; }

  void broadcast(std::string& bytes) override {
    long n = static_cast<long>(bytes.size());
    MPI_Bcast(&n, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    bytes.resize(static_cast<std::size_t>(n));
    MPI_Bcast(bytes.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD);
  }

  std::vector<std::string> allgather(const std::string& mine) override {
    const int length = static_cast<int>(mine.size());
    std::vector<int> lengths(static_cast<std::size_t>(size_));
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<int> offsets(lengths.size(), 0);
    int total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      offsets[r] = total;
      total += lengths[r];
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                   MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      out.push_back(
          all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
    }
    return out;
  }

  std::vector<std::string> gather(const std::string& mine) override {
    const int length = static_cast<int>(mine.size());
    std::vector<int> lengths(rank_ == 0 ? static_cast<std::size_t>(size_) : 0);
    MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<int> offsets(lengths.size(), 0);
    std::size_t total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      offsets[r] = static_cast<int>(total);
      total += static_cast<std::size_t>(lengths[r]);
    }
    std::string all(total, '\0');
    MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                0, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      out.push_back(
          all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
    }
    return out;
  }

  void abort(int exit_code) override {
    if (size_ > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
  }

 private:
  int rank_ = 0, size_ = 1, local_ = 0;
  bool owner_ = false;
};

}  // namespace
}  // namespace trainsim::kexec

extern "C" __attribute__((visibility("default"))) trainsim::kexec::ProcessGroup*
trainsim_mpi_process_group() {
  return new trainsim::kexec::Mpi();
}
