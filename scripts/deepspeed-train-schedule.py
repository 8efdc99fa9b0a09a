#!/usr/bin/env python3
"""Time DeepSpeed's pipeline `TrainSchedule` step by step (docs/validation.md, MT-NLG 530B).

The schedule (deepspeed/runtime/pipe/schedule.py): 2(m + p - 1) steps; stage s runs a forward
pass at step k when k + s is even, a backward pass otherwise, on the micro-batch the schedule's
`_step_to_micro_batch` names; at the start of a forward step it receives the activation from
s - 1 and sends the previous gradient there, at the start of a backward step it sends the
previous activation to s + 1 and receives the gradient from there. The exchanges are blocking and
paired, so a step of stage s starts when s and the neighbour it exchanges with have both ended
their previous step. Communication itself is taken as free: the question is what the lock-step
pairing costs against the 1F1B time (m + p - 1)(t_F + t_B).

Usage: scripts/deepspeed-train-schedule.py P M T_B_OVER_T_F   (e.g. 35 240 3 for full recompute)
"""
import sys


def micro_batch(p, s, k):
    if k % 2 == 0 and s % 2 == 0:
        return k // 2 - s // 2, True
    if k % 2 == 1 and s % 2 == 1:
        return (k - 1) // 2 - s // 2, True
    if k % 2 == 0 and s % 2 == 1:
        return k // 2 - p + (s + 1) // 2, False
    return (k - 1) // 2 - p + 1 + s // 2, False


def iteration(p, m, t_f, t_b):
    def valid(mb):
        return 0 <= mb < m

    end = [0.0] * p
    prev = [-1] * p
    for k in range(2 * (m + p - 1)):
        steps = [micro_batch(p, s, k) for s in range(p)]
        start = list(end)
        for s, (mb, fwd) in enumerate(steps):
            busy = valid(mb) or valid(prev[s])
            if fwd and s > 0 and busy:
                start[s] = max(end[s], end[s - 1])
            elif not fwd and s < p - 1 and busy:
                start[s] = max(end[s], end[s + 1])
        for s, (mb, fwd) in enumerate(steps):
            end[s] = start[s] + ((t_f if fwd else t_b) if valid(mb) else 0.0)
            prev[s] = mb
    return max(end)


if __name__ == "__main__":
    p, m, ratio = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    t = iteration(p, m, 1.0, ratio)
    ideal = (m + p - 1) * (1.0 + ratio)
    print(f"p {p}  m {m}  t_B/t_F {ratio:g}: TrainSchedule {t:g}, 1F1B (m+p-1)(t_F+t_B) {ideal:g}, ratio {t / ideal:.6f}")
