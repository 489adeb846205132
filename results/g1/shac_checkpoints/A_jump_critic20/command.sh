#!/bin/bash
# critic warm-up from the packed jumping policy A (actor held): a SHAC checkpoint of A for
# benchmarks/g1_policy_gradient.py. Writes runs/g1_A_critic; this folder is a copy of its
# run.json, metrics.csv and checkpoints/20. Run from anywhere after scripts/setup.sh.
cd "$(dirname "$0")/../../../.."
exec .venv/bin/bcg train --task g1_jump --stiffness stiff --learner shac --estimator analytic \
      --param env.actions=residual \
      --param env.residual_scale=0.5 --param env.leg_residual_scale=1.0 \
      --param env.randomization=all --param env.w_root_pos=2.0 --param env.w_root_rot=0.5 \
      --param env.w_lin_vel=2.0 --param env.sigma_pos=0.2 --param env.w_feet=10.0 \
      --param env.w_flight=40.0 --param env.w_takeoff=20.0 --param env.w_tuck=20.0 \
      --param 'env.start_focus=[55,100]' --param env.start_focus_prob=0.4 \
      --param env.observe_command=true \
      --param 'env.config={"leg_kp_scale": 2.0, "leg_kp_window": [55, 85]}' \
      --param env.solver_iterations=4 --param env.velocity_feedforward=1.0 \
      --param shac.actor_lr=0.0003 --param shac.critic_warmup=20 \
      --actor-hidden 256,128 --critic-hidden 256,128 --init-log-std -1.0 \
      --num-envs 64 --horizon 32 --checkpoint-every 10 --eval-episodes 0 --iterations 20 \
      --run-dir runs/g1_A_critic --init-from results/g1/A_stage29_ff1 --quiet
