#!/usr/bin/env bash
# GRPO with verl 0.9 on the extraction task, rewarded by referee.
#   python examples/verl/prepare.py --out ~/data/extraction
#   MODEL=Qwen/Qwen2.5-0.5B-Instruct bash examples/verl/run.sh
# verl 0.9 reads the reward function from `reward.custom_reward_function.*`; the old top-level
# `custom_reward_function.*` keys are silently ignored there. The spec path must be absolute:
# the reward workers run in other processes.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DATA="${DATA:-$HOME/data/extraction}"
MODEL="${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}"

python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  data.train_files="$DATA/train.parquet" \
  data.val_files="$DATA/test.parquet" \
  data.train_batch_size=32 \
  data.max_prompt_length=512 \
  data.max_response_length=256 \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=16 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 \
  reward.custom_reward_function.path=pkg://referee.backends.verl \
  reward.custom_reward_function.name=compute_score_async \
  "+reward.custom_reward_function.reward_kwargs={spec: $HERE/spec.yaml}" \
  trainer.n_gpus_per_node=1 \
  trainer.nnodes=1 \
  trainer.total_training_steps=20 \
  trainer.logger=console \
  "$@"

# For a spec with a group reward (group_rank, pairwise_judge), use referee's reward manager,
# which scores each GRPO group together (grouped by verl's uid):
#   reward.reward_manager.source=importlib \
#   reward.reward_manager.name=RefereeRewardLoopManager \
#   reward.reward_manager.module.path=pkg://referee.backends.verl \
#   "+reward.reward_kwargs={spec: $HERE/group_spec.yaml}"
