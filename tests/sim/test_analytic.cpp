// sim/exec/analytic: invariants of the iteration model and hand-checkable special cases.
#include "sim/exec/analytic.h"

#include <gtest/gtest.h>

#include <cstring>

#include "sim/core/error.h"
#include "sim/exec/compute_model.h"
#include "sim/model/ops.h"
#include "sim/plan/layout.h"

namespace trainsim::exec {
namespace {

RunConfig base(int gpus, int tp, int pp, int dp) {
  RunConfig c;
  c.model.layers = 16;
  c.model.hidden = 2048;
  c.model.heads = 16;
  c.model.kv_heads = 16;
  c.model.ffn_hidden = 8192;
  c.model.vocab = 51200;
  c.model.seq_len = 2048;
  c.cluster.gpus = gpus;
  c.cluster.gpus_per_node = 8;
  c.cluster.nics_per_node = 8;
  c.cluster.nic_Gbps = 200;
  c.cluster.gpu = {"a100-80gb", 312e12, 0, 80e9, 2.04e12, 300e9, false};
  c.parallel.tp = tp;
  c.parallel.pp = pp;
  c.parallel.dp = dp;
  c.training.global_batch = 64 * dp;
  c.training.micro_batch = 1;
  c.profile = calib::builtin_profile("a100-80gb");
  return c;
}

void expect_breakdown_adds_up(const Result& r) {
  EXPECT_NEAR(r.breakdown.total(), r.iteration_time_s, 1e-12 * r.iteration_time_s);
  EXPECT_GT(r.mfu, 0);
  EXPECT_LT(r.mfu, 1);
  EXPECT_LE(r.mfu, r.hfu);
  EXPECT_NEAR(r.tflops_per_gpu * 1e12, r.mfu * r.peak_flops_per_gpu, 1e-6 * r.tflops_per_gpu * 1e12);
}

// One GPU: no communication at all; the iteration is compute + optimizer + data loading and
// MFU = model FLOPs / (time · peak).
TEST(Analytic, SingleGpuHasOnlyComputeOptimizerAndData) {
  RunConfig c = base(1, 1, 1, 1);
  c.training.recompute = model::Recompute::kFull;
  const Result r = run_analytic(c);
  expect_breakdown_adds_up(r);
  const Breakdown& b = r.breakdown;
  EXPECT_EQ(b.exposed_tp_s + b.exposed_pp_s + b.exposed_dp_s + b.exposed_cp_s + b.exposed_ep_s +
                b.pipeline_bubble_s, 0.0);
  EXPECT_DOUBLE_EQ(b.data_loading_s, c.profile.data_loading_s);
  EXPECT_DOUBLE_EQ(r.network.nic_bytes_per_gpu, 0.0);
  EXPECT_DOUBLE_EQ(r.mfu, r.model_flops_per_iteration / (r.iteration_time_s * 312e12));
  // Compute time is never below the roofline of its FLOPs at peak.
  EXPECT_GT(b.compute_s, r.hardware_flops_per_iteration / 312e12);
}

// Pipeline formula: m slots of the slowest stage run the work, and the fill and drain run
// through the other stages, (Σ slot_i − max slot)/v (analytic-19; (p−1)/v · max slot before).
// With a 64-token vocabulary the 8 stages of 2 layers are even but for the embedding and the
// head: the bubble is (p−1)/(v·m) of the work
// (the end stages' embedding, final norm and loss kernels: within 2 %, and never above (p−1)
// slots of the slowest stage). With the 51,200-token
// vocabulary the last stage carries a head of about two layers: every other stage is about
// half of it, so the bubble is about half of (p−1)/m slots of the last stage (0.114 against
// 7/32 = 0.219).
TEST(Analytic, PipelineBubbleFormula) {
  RunConfig c = base(8, 1, 8, 1);
  c.training.global_batch = 32;
  c.model.vocab = 64;
  const Result r = run_analytic(c);
  expect_breakdown_adds_up(r);
  const Breakdown& b = r.breakdown;
  const double steady = b.compute_s + b.exposed_tp_s + b.exposed_pp_s;
  EXPECT_NEAR(b.pipeline_bubble_s / steady, 7.0 / 32, 0.02 * 7.0 / 32);
  EXPECT_LE(b.pipeline_bubble_s / steady, 7.0 / 32 + 1e-12);
  c.parallel.vpp = 2;
  c.parallel.schedule = plan::Schedule::kInterleaved;
  const Result ri = run_analytic(c);
  const Breakdown& bi = ri.breakdown;
  EXPECT_NEAR(bi.pipeline_bubble_s / (bi.compute_s + bi.exposed_pp_s), 7.0 / 2 / 32,
              0.02 * 7.0 / 2 / 32);
  EXPECT_LT(ri.breakdown.pipeline_bubble_s, r.breakdown.pipeline_bubble_s);
  c.parallel.vpp = 1;
  c.parallel.schedule = plan::Schedule::k1F1B;
  c.model.vocab = 51200;
  const Result heavy = run_analytic(c);
  const Breakdown& h = heavy.breakdown;
  const double ratio = h.pipeline_bubble_s / (h.compute_s + h.exposed_tp_s + h.exposed_pp_s);
  EXPECT_GT(ratio, 0.4 * 7.0 / 32);
  EXPECT_LT(ratio, 0.6 * 7.0 / 32);
}

// Each overlap lever hides communication it targets and nothing else gets slower.
TEST(Analytic, OverlapLeversReduceExposedCommunication) {
  RunConfig c = base(64, 8, 2, 4);
  c.parallel.sp = true;
  c.parallel.zero = 1;
  const Result off = run_analytic(c);
  expect_breakdown_adds_up(off);
  EXPECT_GT(off.breakdown.exposed_tp_s, 0);
  EXPECT_GT(off.breakdown.exposed_dp_s, 0);
  EXPECT_GT(off.breakdown.exposed_pp_s, 0);
  RunConfig on = c;
  on.opt.tp_overlap = true;
  EXPECT_LT(run_analytic(on).breakdown.exposed_tp_s, off.breakdown.exposed_tp_s);
  on = c;
  on.opt.dp_overlap = true;
  EXPECT_LT(run_analytic(on).breakdown.exposed_dp_s, off.breakdown.exposed_dp_s);
  on = c;
  on.opt.pp_overlap = true;
  EXPECT_LT(run_analytic(on).breakdown.exposed_pp_s, off.breakdown.exposed_pp_s);
  on = c;
  on.opt.async_data_pipeline = true;
  EXPECT_EQ(run_analytic(on).breakdown.data_loading_s, 0.0);
  on = c;
  on.opt.efficient_operators = true;  // with the kernel the scenario resolver sets for it
  on.opt.attention_kernel = model::AttentionKernel::kFlash2;
  EXPECT_LT(run_analytic(on).breakdown.compute_s, off.breakdown.compute_s);
  on = c;
  on.model.parallel_block = true;
  EXPECT_LT(run_analytic(on).breakdown.exposed_tp_s, off.breakdown.exposed_tp_s);
}

// TP (with SP) and DP overlapped, ZeRO-1, on a GPU of 108 SMs: collectives beside compute.
RunConfig overlapped(RunConfig c) {
  c.cluster.gpu.sms = 108;
  c.parallel.sp = true;
  c.parallel.zero = 1;
  c.opt.tp_overlap = c.opt.dp_overlap = true;
  return c;
}

// An overlapped collective holds collectives.comm_sms SMs (NCCL's channels, one thread block
// each; unset, the profile's nccl_channels: 24 on the A100's server): the compute beside it runs
// on the rest, so holding more of them costs more (ComputeModel::concurrent), the profile's count
// is the default to the bit, and holding every SM costs what no overlap at all would for that
// collective (the share is capped at the whole GPU).
TEST(Analytic, CollectivesHoldTheirSmsFromTheComputeBesideThem) {
  const RunConfig c = overlapped(base(64, 8, 2, 4));
  const Result d = run_analytic(c);
  ASSERT_EQ(c.profile.nccl_channels, 24);  // TP inside a server: 24; DP across: 16
  RunConfig k = c;
  k.opt.comm_sms = 8;
  const Result fewer = run_analytic(k);
  EXPECT_LT(fewer.iteration_time_s, d.iteration_time_s);
  EXPECT_LT(fewer.breakdown.exposed_tp_s, d.breakdown.exposed_tp_s);
  k.opt.comm_sms = 48;
  const Result more = run_analytic(k);
  expect_breakdown_adds_up(more);
  EXPECT_GT(more.iteration_time_s, d.iteration_time_s);
  EXPECT_GT(more.breakdown.exposed_tp_s, d.breakdown.exposed_tp_s);
  // A profile that does not know NCCL's channels: kDefaultNcclChannels, 24.
  RunConfig u = c;
  u.profile.nccl_channels = 0;
  EXPECT_EQ(exec::kDefaultNcclChannels, 24);
  EXPECT_EQ(run_analytic(u).iteration_time_s, d.iteration_time_s);
  u.profile.nccl_channels = 8;
  EXPECT_EQ(run_analytic(u).iteration_time_s, fewer.iteration_time_s);
  k.opt.comm_sms = 108;
  const Result all = run_analytic(k);
  EXPECT_GT(all.iteration_time_s, more.iteration_time_s);
  k.opt.comm_sms = 1000;  // more than the GPU has: the whole GPU
  EXPECT_EQ(run_analytic(k).iteration_time_s, all.iteration_time_s);
  // The share is what ComputeModel::concurrent charges: t_compute + share · t_comm.
  EXPECT_DOUBLE_EQ(ComputeModel::concurrent(10, 4, 24.0 / 108), 10 + 4 * 24.0 / 108);
  EXPECT_DOUBLE_EQ(ComputeModel::concurrent(10, 4, 1.0), 14);
}

// The SMs are priced per kind of kernel: under a TP overlap the TP collectives hold the
// framework's overlap kernels' SMs (framework.tp_overlap_sms; Transformer Engine's userbuffers are
// not NCCL), the DP ones NCCL's channels, and a decomposed overlap's all-gathers that feed their
// GEMM piece by piece (TE's ring exchange, by copy engine) one SM. So tp_overlap_sms moves the
// exposed TP alone; a bulk overlap (no ring exchange) moves exactly as far as holding that many
// SMs in every collective would; without a TP overlap the TP collectives are NCCL's (Megatron's
// asynchronous backward) and the key is ignored.
TEST(Analytic, TpOverlapKernelsHoldTheirOwnSms) {
  const RunConfig c = overlapped(base(64, 8, 2, 4));
  const Result d = run_analytic(c);  // every collective at NCCL's 24
  ASSERT_GT(d.breakdown.exposed_dp_s, 0);
  RunConfig k = c;
  k.opt.tp_overlap_sms = 16;
  const Result ub = run_analytic(k);
  EXPECT_LT(ub.breakdown.exposed_tp_s, d.breakdown.exposed_tp_s);
  // The DP reduction's windows are the passes with their exposed TP (so it moves, slightly).
  EXPECT_NEAR(ub.breakdown.exposed_dp_s, d.breakdown.exposed_dp_s, 1e-3 * d.breakdown.exposed_dp_s);
  RunConfig all = c;
  all.opt.comm_sms = 16;
  const Result a16 = run_analytic(all);
  EXPECT_LT(ub.breakdown.exposed_tp_s, a16.breakdown.exposed_tp_s);  // its ring exchanges: 1 SM
  // The DP group spans servers, where NCCL already runs 16 channels (two a NIC).
  EXPECT_NEAR(a16.breakdown.exposed_dp_s, d.breakdown.exposed_dp_s, 1e-3 * d.breakdown.exposed_dp_s);
  k.opt.tp_overlap_decomposed = all.opt.tp_overlap_decomposed = false;
  EXPECT_EQ(run_analytic(k).breakdown.exposed_tp_s, run_analytic(all).breakdown.exposed_tp_s);
  k.opt.tp_overlap_decomposed = true;
  // collectives.comm_sms no longer reaches the TP overlap's kernels once they have their own.
  RunConfig both = k;
  both.opt.comm_sms = 48;
  EXPECT_EQ(run_analytic(both).breakdown.exposed_tp_s, ub.breakdown.exposed_tp_s);
  // Without a TP overlap the backward's asynchronous TP collectives are NCCL's.
  RunConfig async = c;
  async.opt.tp_overlap = false;
  async.opt.tp_async_backward = true;
  const Result nccl = run_analytic(async);
  async.opt.tp_overlap_sms = 16;
  EXPECT_EQ(run_analytic(async).iteration_time_s, nccl.iteration_time_s);
  async.opt.comm_sms = 16;
  EXPECT_LT(run_analytic(async).breakdown.exposed_tp_s, nccl.breakdown.exposed_tp_s);
}

// Across servers NCCL runs two channels a NIC (its inter-node ring search finds about one ring
// per NIC and doubles them), at most the server's own count: 16 on a server of 8 NICs whose
// NVLink would take 24, 8 with 4 NICs. A DP group across servers (TP 8 fills each) therefore
// holds 16 SMs on the A100's profile: the same run, to the bit, as a profile of 16 channels or
// collectives.comm_sms 16; with 4 NICs a server, 8.
TEST(Analytic, NcclRunsTwoChannelsANicAcrossServers) {
  EXPECT_EQ(nccl_network_channels(24, 8), 16);
  EXPECT_EQ(nccl_network_channels(24, 4), 8);
  EXPECT_EQ(nccl_network_channels(32, 8), 16);
  EXPECT_EQ(nccl_network_channels(16, 8), 16);
  EXPECT_EQ(nccl_network_channels(24, 0), 2);
  calib::Profile p;
  p.nccl_channels = 24;
  plan::Optimizations o;
  EXPECT_EQ(nccl_sms(o, p, {false, 8}), 24);
  EXPECT_EQ(nccl_sms(o, p, {true, 8}), 16);
  o.comm_sms = 40;  // the key overrides both
  EXPECT_EQ(nccl_sms(o, p, {true, 8}), 40);
  EXPECT_EQ(nccl_sms(o, p, {false, 8}), 40);

  RunConfig c = base(64, 8, 2, 4);
  c.cluster.gpu.sms = 108;
  c.parallel.sp = true;
  c.parallel.zero = 1;
  c.opt.dp_overlap = true;
  c.opt.tp_overlap = c.opt.tp_async_backward = false;  // no TP collective beside a GEMM
  ASSERT_EQ(c.profile.nccl_channels, 24);
  const Result d = run_analytic(c);
  ASSERT_GT(d.breakdown.exposed_dp_s, 0);
  RunConfig k = c;
  k.profile.nccl_channels = 16;
  EXPECT_EQ(run_analytic(k).iteration_time_s, d.iteration_time_s);
  k = c;
  k.opt.comm_sms = 16;
  EXPECT_EQ(run_analytic(k).iteration_time_s, d.iteration_time_s);
  k = c;
  k.opt.comm_sms = 24;
  EXPECT_GT(run_analytic(k).breakdown.exposed_dp_s, d.breakdown.exposed_dp_s);
  k = c;
  k.cluster.nics_per_node = 4;
  k.opt.comm_sms = 0;
  RunConfig e = k;
  e.opt.comm_sms = 8;
  EXPECT_EQ(run_analytic(k).iteration_time_s, run_analytic(e).iteration_time_s);
  e.opt.comm_sms = 16;  // what 8 NICs would have given
  EXPECT_GT(run_analytic(e).breakdown.exposed_dp_s, run_analytic(k).breakdown.exposed_dp_s);
}

// ZeRO-3 gathers the weights again for the backward pass and reduce-scatters the gradients in
// it, both over the same NICs: hidden behind one backward pass together, never each behind the
// whole of it. A 0.8B model on 16 one-GPU servers with DP overlap is bound by those bytes, so
// the iteration can be no shorter than its NIC bytes at the NIC's rate: utilisation at most 1
// (it read above 1 when each hid behind the pass alone).
TEST(Analytic, ZeroThreeBackwardCollectivesShareOnePass) {
  RunConfig c = base(16, 1, 1, 16);
  c.cluster.gpus_per_node = 1;
  c.cluster.nics_per_node = 1;
  c.parallel.zero = 3;
  c.opt.dp_overlap = true;
  c.training.global_batch = 16;
  const Result r = run_analytic(c);
  expect_breakdown_adds_up(r);
  ASSERT_GT(r.breakdown.exposed_dp_s, 0.1 * r.iteration_time_s);  // communication-bound
  EXPECT_LE(r.network.nic_utilization, 1.0 + 1e-9);
  EXPECT_LE(r.network.max_link_utilization, 1.0 + 1e-9);
}

// Interleaving with layers that do not split evenly into a stage's chunks: the fill and drain
// take p − 1 steps of the largest chunk (⌈n/v⌉ of the stage's n layers), not of n/v. Two stages
// of 5 layers: vpp 5 (1 layer a chunk) gives (p−1)/5 of the stage slot, vpp 4 (chunks of 2, 1,
// 1, 1) 2/5 and vpp 2 (3, 2) 3/5, twice and three times as much; the slot itself is the same.
// The interleaved bubble of `layers` layers on `pp` stages of TP 8 (the end stages given `ends`
// layers each) at `vpp` chunks; sends that do not hold the slot (pp_overlap).
double interleaved_bubble(int pp, int layers, int ends, int vpp) {
  RunConfig c = base(8 * pp, 8, pp, 1);
  c.model.layers = layers;
  c.parallel.first_stage_layers = ends;
  c.parallel.last_stage_layers = ends;
  c.parallel.schedule = plan::Schedule::kInterleaved;
  c.opt.pp_overlap = true;  // the slot then holds no per-chunk send/recv
  c.parallel.vpp = vpp;
  const Result r = run_analytic(c);
  expect_breakdown_adds_up(r);
  return r.breakdown.pipeline_bubble_s;
}

TEST(Analytic, UnevenChunksPaceThePipelineFill) {
  const auto bubble = [](int vpp) { return interleaved_bubble(2, 10, 5, vpp); };
  const double even = bubble(5);
  ASSERT_GT(even, 0);
  EXPECT_NEAR(bubble(4), 2 * even, 1e-12 * even);
  EXPECT_NEAR(bubble(2), 3 * even, 1e-12 * even);
}

// Llama 3's layout (Llama Team 2024, §3.3.2): a layer fewer on each end stage and one layer per
// chunk, so that the first stage's first chunk holds only the embedding and the last stage's
// last chunk only the output layer: 14 layers as 3 + 4 + 4 + 3 on 4 stages of 4 chunks (16
// chunks, which the layout refused until 2026-12-06 as more chunks than layers). The slowest
// stage's 4 layers fill the pipeline one layer per step at 4 chunks and two at 2 chunks, so the
// bubble halves from vpp 2 to vpp 4, the stages' slots being the same.
TEST(Analytic, EndChunksWithoutLayersHalveTheBubble) {
  const double four = interleaved_bubble(4, 14, 3, 4);
  ASSERT_GT(four, 0);
  EXPECT_NEAR(interleaved_bubble(4, 14, 3, 2), 2 * four, 1e-12 * four);
}

// A pipeline boundary's activation (framework.pp_activation, collectives.p2p_net_channels):
// TP 8 · PP 2 across two servers, SP off, 8 micro-batches, one chunk. Each stage sends and
// receives 2 activations per micro-batch (forward, backward), so the exposed PP time is
// 8 · 2 · t(bytes) with t the closed form of one send/recv through the NIC.
//  - scatter-gather (Megatron-LM 2021-02 .. 2023-03): 1/8 of the 16 MiB [2048 × 4096] tensor
//    per rank, plus an all-gather of the whole tensor over the TP group after every receive,
//    which is TP communication: 8 · 2 · AG(16 MiB) more exposed TP than `full`;
//  - full (Megatron-Core): the whole tensor from every rank, no gather;
//  - one NCCL channel per net peer (NCCL before 2.12): the send/recv moves at 14 GB/s instead
//    of the NIC's achieved rate, so exposed PP grows by 16 · (2 MiB) · (1/14e9 − 1/nic);
//  - with SP the activation is sharded already: neither key changes anything.
TEST(Analytic, PipelineActivationTransferFollowsTheFramework) {
  RunConfig c = base(16, 8, 2, 1);
  c.model.hidden = 4096;
  c.model.heads = 32;
  c.model.kv_heads = 32;
  c.model.ffn_hidden = 16384;
  c.training.global_batch = 8;
  c.parallel.sp = false;
  const double full = 2048.0 * 4096 * 2;
  const coll::LinkModel links = link_model(c);
  const coll::GroupShape peer{2, 1, 2, 1};
  const auto t = [&](double bytes, const coll::LinkModel& l) {
    return coll::collective_cost(coll::Kind::kSendRecv, bytes, peer, l, {}).time_s;
  };
  const plan::Layout L = plan::make_layout(c.model, c.cluster, c.parallel, c.training);
  const double ag = coll::collective_cost(coll::Kind::kAllGather, full, L.tp, links, {}).time_s;

  const Result sg = run_analytic(c);
  expect_breakdown_adds_up(sg);
  EXPECT_NEAR(sg.breakdown.exposed_pp_s, 16 * t(full / 8, links), 1e-12);
  RunConfig whole = c;
  whole.opt.pp_activation = plan::PpActivation::kFull;
  const Result fr = run_analytic(whole);
  EXPECT_NEAR(fr.breakdown.exposed_pp_s, 16 * t(full, links), 1e-12);
  EXPECT_NEAR(sg.breakdown.exposed_tp_s - fr.breakdown.exposed_tp_s, 16 * ag, 1e-12);
  EXPECT_GT(ag, 0);

  RunConfig one = c;
  one.opt.p2p_net_channels = 1;
  const Result r1 = run_analytic(one);
  ASSERT_GT(links.nic_Bps_per_gpu, 14e9);
  EXPECT_NEAR(r1.breakdown.exposed_pp_s - sg.breakdown.exposed_pp_s,
              16 * (full / 8) * (1 / 14e9 - 1 / links.nic_Bps_per_gpu), 1e-12);
  RunConfig four = c;
  four.opt.p2p_net_channels = 4;  // 56 GB/s: the NIC bounds it, as with 0
  EXPECT_EQ(run_analytic(four).iteration_time_s, sg.iteration_time_s);

  c.parallel.sp = true;
  whole.parallel.sp = true;
  const Result sp = run_analytic(c);
  EXPECT_EQ(sp.iteration_time_s, run_analytic(whole).iteration_time_s);
  EXPECT_NEAR(sp.breakdown.exposed_pp_s, 16 * t(full / 8, links), 1e-12);
}

// With PP overlap the sends no compute hides are one micro-batch's path through the v·p model
// chunks, both ways: 2·(v·p − 1) sends of one activation (analytic-19; docs/analytic-model.md
// §3). TP 8 · PP 4 over four servers, SP on, 16 micro-batches: without interleaving 2·3 = 6
// sends, with 2 chunks 2·7 = 14, with 4 chunks 2·15 = 30, each the closed form of one
// send/recv of the [2048 × 2048] activation's 1/8 through the NIC; the exposed PP is exactly
// that chain (the slot holds no send), and so is the pipeline's `pp_outside_s`.
TEST(Analytic, OverlappedPipelineSendsExposeOneMicroBatchPathThroughEveryChunk) {
  RunConfig c = base(32, 8, 4, 1);
  c.parallel.sp = true;
  c.training.global_batch = 16;
  c.opt.pp_overlap = true;
  const coll::LinkModel links = link_model(c);
  const double d = coll::collective_cost(coll::Kind::kSendRecv, 2048.0 * 2048 * 2 / 8,
                                         coll::GroupShape{2, 1, 2, 1}, links, {})
                       .time_s;
  ASSERT_GT(d, 0);
  for (const int v : {1, 2, 4}) {
    c.parallel.vpp = v;
    c.parallel.schedule = v > 1 ? plan::Schedule::kInterleaved : plan::Schedule::k1F1B;
    const Result r = run_analytic(c);
    expect_breakdown_adds_up(r);
    EXPECT_NEAR(r.breakdown.exposed_pp_s, 2.0 * (v * 4 - 1) * d, 1e-12) << "vpp " << v;
    EXPECT_NEAR(r.pipeline.pp_outside_s, 2.0 * (v * 4 - 1) * d, 1e-12) << "vpp " << v;
  }
}

// An MoE layer every other layer (model.moe_every 2: layers 0 and 2 of 4 are MoE) prices its
// experts: the compute is the dense model's plus half of what making every layer MoE adds
// (the layers are otherwise alike; embedding and head unchanged). Until analytic-19 the MoE
// layers took a dense layer's ops (the op list came from layer moe_every − 1, dense since
// analytic-17 placed MoE layers at i % moe_every == 0), so top-k 8 of 8 experts read above
// 100 % MFU.
TEST(Analytic, EveryOtherMoeLayerPricesItsExperts) {
  RunConfig c = base(8, 1, 1, 8);
  c.model.layers = 4;
  c.training.recompute = model::Recompute::kNone;
  const auto run = [&](int experts, int every, int top_k) {
    c.model.experts = experts;
    c.model.top_k = top_k;
    c.model.moe_every = every;
    const Result r = run_analytic(c);
    expect_breakdown_adds_up(r);
    EXPECT_LT(r.mfu, 1.0);
    return r.breakdown.compute_s;
  };
  const double dense = run(0, 1, 1);
  const double all = run(8, 1, 2);
  const double half = run(8, 2, 2);
  ASSERT_GT(all, dense);
  EXPECT_NEAR(half - dense, 0.5 * (all - dense), 1e-9 * all);
  EXPECT_GT(run(8, 2, 8), half);  // more experts per token, more expert GEMMs
}

// Past the GEMM rate the profile allows, MFU is counting attention no kernel runs (the whole
// s×s matrix of Megatron's convention, where a causal kernel skips half): the
// result says so at 256K tokens, naming both shares; at 2K (MFU below the ceiling) it says
// nothing.
TEST(Analytic, MfuAboveTheGemmCeilingNamesTheAttentionConvention) {
  const auto note_of = [](const Result& r) {
    for (const std::string& n : r.notes) {
      if (n.find("this profile's GEMMs reach") != std::string::npos) return n;
    }
    return std::string();
  };
  RunConfig c = base(8, 8, 1, 1);
  c.parallel.sp = true;
  c.model.layers = 4;
  c.model.position = model::PositionKind::kRope;
  c.training.recompute = model::Recompute::kNone;
  c.opt.efficient_operators = true;
  c.opt.attention_kernel = model::AttentionKernel::kFlash2;
  EXPECT_EQ(note_of(run_analytic(c)), "");
  c.model.seq_len = 262144;
  c.training.global_batch = 1;
  const Result r = run_analytic(c);
  ASSERT_GT(r.mfu, c.profile.gemm_peak_efficiency);
  const std::string n = note_of(r);
  EXPECT_NE(n.find("at 262144 tokens, while the causal kernel computes 50 % of those scores"),
            std::string::npos)
      << n;
}

// A one-stage configuration's DP buckets under the 40 M rule, by hand: the stage's parameters
// P, the bucket count k (at most one a layer) and the time of one DP collective of some bytes.
struct OneStageBuckets {
  plan::Layout L;
  double P = 0, k = 0;
  coll::LinkModel links;
  double time(coll::Kind kind, double bytes) const {
    return coll::collective_cost(kind, bytes, L.dp, links, {}).time_s;
  }
};
OneStageBuckets one_stage_buckets(const RunConfig& c) {
  OneStageBuckets b;
  b.L = plan::make_layout(c.model, c.cluster, c.parallel, c.training);
  b.P = plan::stage_parameters(c.model, b.L, true, true, c.model.layers).total();
  b.k = plan::dp_bucket_count(
      b.P, plan::dp_bucket_params(plan::BucketRule::kFixed40M, c.parallel.dp), c.model.layers);
  b.links = link_model(c);
  return b;
}

// Each DP bucket is a collective of its own and pays the ring's latency again, as the Program
// runs them (analytic-19): the stage's gradients go in k = clamp(⌈P / bucket⌉, 1, layers)
// reductions of P/k parameters, not one of P. ZeRO-3 without overlap on TP 8 · DP 8 (one
// stage): each micro-batch gathers the weights twice (2 B a parameter) and reduce-scatters the
// fp32 gradients once, all exposed: m · k · (2·AG(2P/k) + RS(4P/k)), k = 3 buckets of the
// 40 M-parameter rule here. At DP 768 the per-bucket latency made the executed schedule of a
// ZeRO-3 sweep point 13 points slower than the closed form's one-collective price. Without DP
// overlap ZeRO-3 gathers on demand, once the forward is called on the loaded batch, so the
// host's data-loading stall hides none of them (analytic-38; from analytic-32 it hid min(d, AG),
// as the Program then ran the first forward's gathers during the stall).
TEST(Analytic, EveryDpBucketIsACollectiveOfItsOwn) {
  RunConfig c = base(64, 8, 1, 8);
  c.parallel.zero = 3;
  c.opt.dp_buckets = plan::BucketRule::kFixed40M;
  const Result r = run_analytic(c);
  expect_breakdown_adds_up(r);
  const OneStageBuckets b = one_stage_buckets(c);
  const plan::Layout& L = b.L;
  const double P = b.P, k = b.k;
  ASSERT_EQ(k, 3.0);
  const auto t = [&](coll::Kind kind, double bytes) { return b.time(kind, bytes); };
  const double per_mb = k * (2 * t(coll::Kind::kAllGather, 2 * P / k) +
                             t(coll::Kind::kReduceScatter, 4 * P / k));
  ASSERT_GT(r.breakdown.data_loading_s, 0.0);
  EXPECT_NEAR(r.breakdown.exposed_dp_s, L.microbatches * per_mb, 1e-9 * r.breakdown.exposed_dp_s);
  // One collective of the whole stage would be cheaper by (k − 1) latencies per collective.
  const double one = 2 * t(coll::Kind::kAllGather, 2 * P) + t(coll::Kind::kReduceScatter, 4 * P);
  EXPECT_GT(per_mb, one);
}

// ZeRO-3 with DP overlap (analytic-30), by hand: per micro-batch and chunk pass, the forward
// waits for its first bucket's gather (AG/k), which queues behind the last bucket's
// reduce-scatter of the backward before it (RS/k); the rest (the forward's other gathers, the
// backward's own, issued right after them, and the other reduce-scatters: 2·AG + RS − AG/k −
// RS/k) runs beside the two passes as concurrent kernels, costing them sm_share of its time
// (here the passes are far longer: one stage, DP 8 over NVLink, micro-batches of 4). k is the
// chunk's bucket count (the 40 M rule, at most one a layer), AG and RS the stage's (k
// collectives each), s = NCCL's 24 channels (the A100 profile's nccl_channels) / 108 SMs. The host's data-loading stall d hides min(d, AG/k) of the
// iteration's first gather (analytic-32). (The embedding's share, which analytic-35 exposes at
// ZeRO 0-2, is not added to ZeRO-3's chain: E below stays out of it.)
TEST(Analytic, ZeroThreeExposesTheFirstGatherAndTheLastReduceScatterOfEachPass) {
  RunConfig c = base(8, 1, 1, 8);
  c.training.micro_batch = 4;
  c.parallel.zero = 3;
  c.opt.dp_overlap = true;
  c.opt.dp_buckets = plan::BucketRule::kFixed40M;
  c.cluster.gpu.sms = 108;
  const Result r = run_analytic(c);
  expect_breakdown_adds_up(r);
  const OneStageBuckets b = one_stage_buckets(c);
  const plan::Layout& L = b.L;
  const double P = b.P, k = b.k;
  ASSERT_EQ(k, 16.0);  // ⌈0.9 B / 40 M⌉ = 23, at most one a layer
  const auto t = [&](coll::Kind kind, double bytes) { return b.time(kind, bytes); };
  const double ag = k * t(coll::Kind::kAllGather, 2 * P / k);
  const double rs = k * t(coll::Kind::kReduceScatter, 4 * P / k);
  ASSERT_EQ(c.profile.nccl_channels, 24);
  const double s = 24.0 / 108;
  // The embedding: the token table and the learned positions, TP 1.
  const double E = 51200.0 * 2048 + 2048.0 * 2048;
  ASSERT_EQ(E, model::embedding_params_per_rank(c.model, model::count_parameters(c.model), 1));
  const double per_mb = ag / k + rs / k + s * (2 * ag + rs - ag / k - rs / k);
  ASSERT_GT(r.breakdown.data_loading_s, 0.0);
  EXPECT_NEAR(r.breakdown.exposed_dp_s,
              L.microbatches * per_mb - std::min(r.breakdown.data_loading_s, ag / k),
              1e-9 * r.breakdown.exposed_dp_s);
  EXPECT_GT(E, 0.1 * P);  // the embedding is a tenth of the stage, and changes nothing here
  // The passes far outlast the collectives (what the closed form above takes).
  EXPECT_LT(2 * ag + rs, 0.5 * r.breakdown.compute_s / L.microbatches);
}

// Same inputs, same numbers, bit for bit.
TEST(Analytic, Deterministic) {
  const RunConfig c = base(64, 8, 2, 4);
  const Result a = run_analytic(c), b = run_analytic(c);
  EXPECT_EQ(std::memcmp(&a.iteration_time_s, &b.iteration_time_s, sizeof(double)), 0);
  EXPECT_EQ(a.breakdown.exposed_dp_s, b.breakdown.exposed_dp_s);
  EXPECT_EQ(a.memory.peak_bytes, b.memory.peak_bytes);
}

// A configuration that does not fit reports the numbers, or is returned unfit when asked.
TEST(Analytic, DoesNotFit) {
  RunConfig c = base(1, 1, 1, 1);
  c.model.layers = 96;
  c.model.hidden = 12288;
  c.model.heads = 96;
  c.model.kv_heads = 96;
  c.model.ffn_hidden = 4 * 12288;
  try {
    run_analytic(c);
    FAIL() << "175B on one GPU cannot fit";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInfeasible);
    EXPECT_NE(e.message().find("does not fit in memory: needs"), std::string::npos);
    EXPECT_NE(e.message().find("GiB of 74.5 GiB"), std::string::npos) << e.message();
    // Unfused attention stores the s×s scores: the hint names the fused kernel as a lever.
    EXPECT_NE(e.hint().find("framework.attention_kernel=flash2"), std::string::npos) << e.hint();
  }
  c.opt.attention_kernel = model::AttentionKernel::kFlash2;
  try {
    run_analytic(c);
    FAIL() << "175B on one GPU cannot fit";
  } catch (const Error& e) {
    EXPECT_EQ(e.hint().find("attention_kernel"), std::string::npos) << e.hint();
  }
  AnalyticOptions o;
  o.enforce_memory = false;
  const Result r = run_analytic(c, o);
  EXPECT_FALSE(r.memory.fits());
}

// fp8 needs a GPU with fp8 tensor cores; with one, GEMMs use the fp8 peak.
TEST(Analytic, Fp8) {
  RunConfig c = base(1, 1, 1, 1);
  c.training.precision = Precision::kFp8;
  EXPECT_THROW(run_analytic(c), Error);
  c.cluster.gpu.peak_dense_fp8_flops = 624e12;
  const Result r = run_analytic(c);
  EXPECT_DOUBLE_EQ(r.peak_flops_per_gpu, 624e12);
}

// Recompute costs time: full > selective > none in compute, and HFU counts it.
TEST(Analytic, RecomputeCostsTime) {
  RunConfig c = base(8, 8, 1, 1);
  c.parallel.sp = true;
  double prev = 0;
  for (auto rc : {model::Recompute::kNone, model::Recompute::kSelective, model::Recompute::kFull}) {
    c.training.recompute = rc;
    const Result r = run_analytic(c);
    EXPECT_GT(r.breakdown.compute_s, prev);
    prev = r.breakdown.compute_s;
  }
}

}  // namespace
}  // namespace trainsim::exec

namespace trainsim::exec {
namespace {

// Activation offloading (training.cpu_offload_layers): with pipeline parallelism or recompute the
// core refuses the point, naming the key (a sweep that varies pp meets it there); with neither it
// prices the copies: a host link slow enough makes the iteration longer, by the stalls the
// breakdown's compute carries.
TEST(Analytic, ActivationOffloadingAsMegatronAllowsIt) {
  RunConfig c = base(8, 1, 2, 4);
  c.cluster.gpu.host_link_Bps = 32e9;
  c.training.cpu_offload_layers = 4;
  try {
    run_analytic(c);
    FAIL() << "offloading with pp 2";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInfeasible);
    EXPECT_EQ(e.where().field, "training.cpu_offload_layers");
  }
  c = base(8, 1, 1, 8);
  c.cluster.gpu.host_link_Bps = 32e9;
  c.training.recompute = model::Recompute::kFull;
  c.training.cpu_offload_layers = 4;
  EXPECT_THROW(run_analytic(c), Error);
  c.training.recompute = model::Recompute::kNone;
  const Result fast = run_analytic(c);
  c.cluster.gpu.host_link_Bps = 0.5e9;  // copies far slower than a layer's compute
  const Result slow = run_analytic(c);
  EXPECT_EQ(fast.memory.activations_bytes, slow.memory.activations_bytes);
  EXPECT_GT(slow.offload_stall_s, 0);
  EXPECT_NEAR(slow.breakdown.compute_s - fast.breakdown.compute_s,
              slow.offload_stall_s - fast.offload_stall_s, 1e-9 * slow.breakdown.compute_s);
  expect_breakdown_adds_up(slow);
}

}  // namespace
}  // namespace trainsim::exec
