"""Feasibility probe: a randomly initialised Llama (no weights download) decoding on the GPU."""
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=16, num_attention_heads=16,
                  num_key_value_heads=8, vocab_size=32000, max_position_embeddings=4096)
m = LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
ids = torch.randint(0, 32000, (4, 128), device="cuda")
for new in (8, 64):
    torch.cuda.synchronize()
    t = time.perf_counter()
    with torch.no_grad():
        out = m.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    print(f"generate batch 4, prompt 128, {new} new tokens: {time.perf_counter()-t:.3f} s, out {tuple(out.shape)}")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof, torch.no_grad():
    m.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0)
names = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
print(len(names), "distinct CUDA kernels")
for n in names[:80]:
    print("  ", n[:160])
