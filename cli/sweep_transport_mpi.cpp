// SweepGroup over MPI (built when CMake finds MPI).
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli/sweep_transport.h"

namespace trainsim::cli {
namespace {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

class MpiGroup : public SweepGroup {
 public:
  MpiGroup() {
    MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiGroup() override { MPI_Finalize(); }
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

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
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

std::unique_ptr<SweepGroup> make_sweep_group() {
  if (!launched_by_mpi()) return std::make_unique<SweepGroup>();
  return std::make_unique<MpiGroup>();
}

int local_ranks() {
  const char* n = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int v = n == nullptr ? 1 : std::atoi(n);
  return v > 0 ? v : 1;
}

}  // namespace trainsim::cli
