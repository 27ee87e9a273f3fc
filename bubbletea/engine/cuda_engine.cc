// The "cuda" engine: cuBLAS GEMMs (cublasGemmEx, fp32 accumulation) plus the kernels in
// cuda_kernels.cu, all on one stream created with the lowest priority.
//
// Precision: with BF16 (or F16, converted to BF16 at upload) weights the GEMM inputs are
// bf16 and the KV cache is bf16; with all-F32 weights everything is fp32 (CUBLAS_COMPUTE_32F
// without TF32). The residual stream, GEMM outputs, norms, softmax and logits are always
// fp32. Residual adds are fused into the o_proj/down_proj GEMMs (beta = 1).
//
// Memory: weights are uploaded once at creation (cudaMalloc, synchronous: do it outside a
// training bubble). KV caches and activation scratch use stream-ordered allocation
// (cudaMallocAsync), which does not synchronize the device, so sequences can be created
// while training runs. A KvCache may outlive its engine; its memory is released on the
// engine's stream, which lives until the last cache is gone.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "bubbletea/engine/cuda_kernels.h"
#include "bubbletea/engine/engine.h"

namespace atlas::bubbletea {

namespace {

using cuda::ActType;

Status cudaStatus(const char* what, cudaError_t err) {
    return {
        err == cudaErrorMemoryAllocation ? Code::kSystem : Code::kInternal,
        std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")"};
}

Status cublasStatus(const char* what, cublasStatus_t st) {
    return {Code::kInternal,
            std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(st))};
}

#define ATLAS_CUDA_TRY(expr)                      \
    do {                                          \
        const cudaError_t atlas_err_ = (expr);    \
        if (atlas_err_ != cudaSuccess) {          \
            return cudaStatus(#expr, atlas_err_); \
        }                                         \
    } while (0)

#define ATLAS_CUBLAS_TRY(expr)                     \
    do {                                           \
        const cublasStatus_t atlas_st_ = (expr);   \
        if (atlas_st_ != CUBLAS_STATUS_SUCCESS) {  \
            return cublasStatus(#expr, atlas_st_); \
        }                                          \
    } while (0)

// The stream (and device) shared by an engine and its caches; destroyed with the last owner.
struct StreamContext {
    int device = 0;
    cudaStream_t stream = nullptr;
    bool async_alloc = false;  // the device supports cudaMallocAsync

    ~StreamContext() {
        if (stream != nullptr) {
            cudaSetDevice(device);
            cudaStreamSynchronize(stream);
            cudaStreamDestroy(stream);
        }
    }

    cudaError_t alloc(void** p, size_t bytes) const {
        return async_alloc ? cudaMallocAsync(p, bytes, stream) : cudaMalloc(p, bytes);
    }
    void release(void* p) const {
        if (p == nullptr) {
            return;
        }
        if (async_alloc) {
            cudaFreeAsync(p, stream);
        } else {
            cudaFree(p);
        }
    }
};

// A device buffer that only grows, allocated and freed on the context's stream.
class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() { reset(); }

    void bind(std::shared_ptr<StreamContext> ctx) { ctx_ = std::move(ctx); }
    Status reserve(size_t bytes) {
        if (bytes <= size_) {
            return Status::ok();
        }
        reset();
        ATLAS_CUDA_TRY(ctx_->alloc(&ptr_, bytes));
        size_ = bytes;
        return Status::ok();
    }
    void reset() {
        if (ptr_ != nullptr) {
            ctx_->release(ptr_);
            ptr_ = nullptr;
            size_ = 0;
        }
    }
    template <typename T = void>
    T* get() const {
        return static_cast<T*>(ptr_);
    }

  private:
    std::shared_ptr<StreamContext> ctx_;
    void* ptr_ = nullptr;
    size_t size_ = 0;
};

size_t actSize(ActType t) {
    return t == ActType::kBF16 ? 2 : 4;
}

class CudaKvCache final : public KvCache {
  public:
    CudaKvCache(const void* owner, size_t capacity, std::shared_ptr<StreamContext> ctx)
        : KvCache(owner, capacity) {
        buffer.bind(std::move(ctx));
    }
    // [layer][K, V][capacity][kv_heads * head_dim] of the engine's ActType.
    DeviceBuffer buffer;
};

}  // namespace

class CudaEngine final : public Engine {
  public:
    CudaEngine(std::shared_ptr<const Weights> weights, std::shared_ptr<StreamContext> ctx)
        : weights_(std::move(weights)), config_(weights_->config()), ctx_(std::move(ctx)) {}
    ~CudaEngine() override;

    Status init();

    const ModelConfig& config() const override { return config_; }
    std::string name() const override { return "cuda"; }
    Result<std::unique_ptr<KvCache>> newSequence(size_t max_tokens) override;
    Result<PrefillResult> prefillChunk(KvCache& kv, std::span<const int32_t> tokens, bool last,
                                       const std::atomic<bool>* cancel) override;
    Status exportKv(const KvCache& kv, DType dtype, std::vector<std::byte>* out,
                    KvLayout* layout) override;

  private:
    struct DeviceLayer {
        void* qkv = nullptr;      // [q_dim + 2 kv_dim, hidden]: q_proj, k_proj, v_proj rows
        void* o = nullptr;        // [hidden, q_dim]
        void* gate_up = nullptr;  // [2 intermediate, hidden]: gate_proj then up_proj rows
        void* down = nullptr;     // [hidden, intermediate]
        float* input_norm = nullptr;
        float* post_norm = nullptr;
    };

    Result<void*> upload(std::initializer_list<const TensorView*> parts, bool as_float);
    Status gemm(const void* x, int rows, int k, const void* w, int n, float* y, int ldy,
                float beta);
    Status runLayer(size_t l, void* kv_base, size_t capacity, int pos0, int n, int q_begin);
    Status reserveScratch(int rows);

    std::shared_ptr<const Weights> weights_;
    const ModelConfig config_;
    std::shared_ptr<StreamContext> ctx_;
    ActType act_ = ActType::kBF16;
    cublasHandle_t cublas_ = nullptr;
    std::vector<void*> allocations_;  // cudaMalloc'd weights, freed in the destructor
    std::vector<DeviceLayer> layers_;
    void* embed_ = nullptr;
    void* lm_head_ = nullptr;
    float* final_norm_ = nullptr;
    double* inv_freq_ = nullptr;
    void* cublas_workspace_ = nullptr;
    int scratch_rows_ = 0;
    DeviceBuffer tokens_d_;
    DeviceBuffer x_;        // fp32 [rows x hidden] residual
    DeviceBuffer h_;        // act  [rows x hidden]
    DeviceBuffer qkv_;      // fp32 [rows x (q_dim + 2 kv_dim)]
    DeviceBuffer attn_;     // act  [rows x q_dim]
    DeviceBuffer gu_;       // fp32 [rows x 2 intermediate]
    DeviceBuffer act_buf_;  // act [rows x intermediate]
    DeviceBuffer logits_;   // fp32 [vocab]
};

CudaEngine::~CudaEngine() {
    cudaSetDevice(ctx_->device);
    cudaStreamSynchronize(ctx_->stream);
    for (DeviceBuffer* b : {&tokens_d_, &x_, &h_, &qkv_, &attn_, &gu_, &act_buf_, &logits_}) {
        b->reset();
    }
    if (cublas_ != nullptr) {
        cublasDestroy(cublas_);
    }
    cudaStreamSynchronize(ctx_->stream);
    for (void* p : allocations_) {
        cudaFree(p);
    }
}

Result<void*> CudaEngine::upload(std::initializer_list<const TensorView*> parts, bool as_float) {
    size_t elements = 0;
    for (const TensorView* t : parts) {
        elements += static_cast<size_t>(t->numElements());
    }
    const size_t esize = as_float ? 4 : actSize(act_);
    std::vector<std::byte> staging(elements * esize);
    std::vector<float> row;
    size_t at = 0;
    const DType target = as_float || act_ == ActType::kF32 ? DType::kF32 : DType::kBF16;
    for (const TensorView* t : parts) {
        const size_t n = static_cast<size_t>(t->numElements());
        if (t->dtype == target) {  // the common case (BF16 checkpoint): no conversion
            std::memcpy(staging.data() + at * esize, t->data, n * esize);
            at += n;
            continue;
        }
        constexpr size_t kSlice = 1 << 20;
        for (size_t first = 0; first < n; first += kSlice) {
            const size_t count = std::min(kSlice, n - first);
            row.resize(count);
            convertToFloat(t->data, t->dtype, first, count, row.data());
            convertFromFloat(row.data(), count, target, staging.data() + (at + first) * esize);
        }
        at += n;
    }
    void* device = nullptr;
    ATLAS_CUDA_TRY(cudaMalloc(&device, staging.size()));
    allocations_.push_back(device);
    ATLAS_CUDA_TRY(cudaMemcpy(device, staging.data(), staging.size(), cudaMemcpyHostToDevice));
    return device;
}

Status CudaEngine::init() {
    ATLAS_CUDA_TRY(cudaSetDevice(ctx_->device));
    // All-F32 checkpoints run in fp32; anything with a 16-bit matrix runs in bf16.
    bool all_f32 =
        weights_->embedTokens().dtype == DType::kF32 && weights_->lmHead().dtype == DType::kF32;
    for (const LayerWeights& l : weights_->layers()) {
        for (const TensorView* t :
             {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) {
            all_f32 = all_f32 && t->dtype == DType::kF32;
        }
    }
    act_ = all_f32 ? ActType::kF32 : ActType::kBF16;

    ATLAS_CUBLAS_TRY(cublasCreate(&cublas_));
    ATLAS_CUBLAS_TRY(cublasSetStream(cublas_, ctx_->stream));
    // Explicit workspace: otherwise cuBLAS may allocate (and synchronize) on first use.
    constexpr size_t kWorkspace = 32u << 20;
    ATLAS_CUDA_TRY(cudaMalloc(&cublas_workspace_, kWorkspace));
    allocations_.push_back(cublas_workspace_);
    ATLAS_CUBLAS_TRY(cublasSetWorkspace(cublas_, cublas_workspace_, kWorkspace));
    ATLAS_CUBLAS_TRY(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));  // no TF32 for fp32

    for (const LayerWeights& l : weights_->layers()) {
        DeviceLayer d;
        auto qkv = upload({&l.q_proj, &l.k_proj, &l.v_proj}, false);
        auto o = upload({&l.o_proj}, false);
        auto gate_up = upload({&l.gate_proj, &l.up_proj}, false);
        auto down = upload({&l.down_proj}, false);
        auto in_norm = upload({&l.input_layernorm}, true);
        auto post_norm = upload({&l.post_attention_layernorm}, true);
        for (auto* r : {&qkv, &o, &gate_up, &down, &in_norm, &post_norm}) {
            if (!r->isOk()) {
                return r->status();
            }
        }
        d.qkv = *qkv;
        d.o = *o;
        d.gate_up = *gate_up;
        d.down = *down;
        d.input_norm = static_cast<float*>(*in_norm);
        d.post_norm = static_cast<float*>(*post_norm);
        layers_.push_back(d);
    }
    auto embed = upload({&weights_->embedTokens()}, false);
    if (!embed.isOk()) {
        return embed.status();
    }
    embed_ = *embed;
    if (config_.tie_word_embeddings) {
        lm_head_ = embed_;
    } else {
        auto head = upload({&weights_->lmHead()}, false);
        if (!head.isOk()) {
            return head.status();
        }
        lm_head_ = *head;
    }
    auto norm = upload({&weights_->norm()}, true);
    if (!norm.isOk()) {
        return norm.status();
    }
    final_norm_ = static_cast<float*>(*norm);
    const std::vector<double> inv = ropeInverseFrequencies(config_);
    ATLAS_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&inv_freq_), inv.size() * sizeof(double)));
    allocations_.push_back(inv_freq_);
    ATLAS_CUDA_TRY(
        cudaMemcpy(inv_freq_, inv.data(), inv.size() * sizeof(double), cudaMemcpyHostToDevice));
    for (DeviceBuffer* b : {&tokens_d_, &x_, &h_, &qkv_, &attn_, &gu_, &act_buf_, &logits_}) {
        b->bind(ctx_);
    }
    ATLAS_RETURN_IF_ERROR(logits_.reserve(static_cast<size_t>(config_.vocab_size) * 4));
    return Status::ok();
}

Status CudaEngine::reserveScratch(int rows) {
    if (rows <= scratch_rows_) {
        return Status::ok();
    }
    const size_t r = static_cast<size_t>(rows);
    const size_t hidden = static_cast<size_t>(config_.hidden_size);
    const size_t q_dim = static_cast<size_t>(config_.qDim());
    const size_t kv_dim = static_cast<size_t>(config_.kvDim());
    const size_t inter = static_cast<size_t>(config_.intermediate_size);
    const size_t a = actSize(act_);
    ATLAS_RETURN_IF_ERROR(tokens_d_.reserve(r * 4));
    ATLAS_RETURN_IF_ERROR(x_.reserve(r * hidden * 4));
    ATLAS_RETURN_IF_ERROR(h_.reserve(r * hidden * a));
    ATLAS_RETURN_IF_ERROR(qkv_.reserve(r * (q_dim + 2 * kv_dim) * 4));
    ATLAS_RETURN_IF_ERROR(attn_.reserve(r * q_dim * a));
    ATLAS_RETURN_IF_ERROR(gu_.reserve(r * 2 * inter * 4));
    ATLAS_RETURN_IF_ERROR(act_buf_.reserve(r * inter * a));
    scratch_rows_ = rows;
    return Status::ok();
}

// y[rows x n] (ld ldy, fp32) = beta * y + x[rows x k] * w[n x k]^T, x and w of the act type.
// Row-major y is column-major y^T = w * x^T: A = w (transposed), B = x.
Status CudaEngine::gemm(const void* x, int rows, int k, const void* w, int n, float* y, int ldy,
                        float beta) {
    const float alpha = 1.0f;
    const cudaDataType_t in_type = act_ == ActType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
    ATLAS_CUBLAS_TRY(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &alpha, w, in_type,
                                  k, x, in_type, k, &beta, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
    return Status::ok();
}

Status CudaEngine::runLayer(size_t l, void* kv_base, size_t capacity, int pos0, int n,
                            int q_begin) {
    const DeviceLayer& w = layers_[l];
    const int hidden = static_cast<int>(config_.hidden_size);
    const int q_dim = static_cast<int>(config_.qDim());
    const int kv_dim = static_cast<int>(config_.kvDim());
    const int inter = static_cast<int>(config_.intermediate_size);
    const int qkv_dim = q_dim + 2 * kv_dim;
    const auto eps = static_cast<float>(config_.rms_norm_eps);
    const size_t a = actSize(act_);
    cudaStream_t s = ctx_->stream;
    auto* kv_bytes = static_cast<std::byte*>(kv_base);
    const size_t block = capacity * static_cast<size_t>(kv_dim) * a;
    void* k_cache = kv_bytes + (2 * l) * block;
    void* v_cache = kv_bytes + (2 * l + 1) * block;

    ATLAS_CUDA_TRY(cuda::rmsNorm(x_.get<float>(), n, hidden, w.input_norm, eps, h_.get(), act_, s));
    ATLAS_RETURN_IF_ERROR(gemm(h_.get(), n, hidden, w.qkv, qkv_dim, qkv_.get<float>(), qkv_dim, 0));
    const cuda::RopeShape rope{n, pos0, static_cast<int>(config_.num_attention_heads),
                               static_cast<int>(config_.num_key_value_heads),
                               static_cast<int>(config_.head_dim)};
    ATLAS_CUDA_TRY(
        cuda::ropeAndAppend(qkv_.get<float>(), rope, inv_freq_, k_cache, v_cache, act_, s));
    if (q_begin == n) {
        return Status::ok();
    }
    const int m = n - q_begin;
    cuda::RopeShape att = rope;
    att.rows = m;
    att.pos0 = pos0 + q_begin;
    float* x_rows = x_.get<float>() + static_cast<size_t>(q_begin) * hidden;
    ATLAS_CUDA_TRY(cuda::attention(qkv_.get<float>() + static_cast<size_t>(q_begin) * qkv_dim,
                                   qkv_dim, att, k_cache, v_cache, attn_.get(), act_, s));
    ATLAS_RETURN_IF_ERROR(gemm(attn_.get(), m, q_dim, w.o, hidden, x_rows, hidden, 1.0f));
    ATLAS_CUDA_TRY(cuda::rmsNorm(x_rows, m, hidden, w.post_norm, eps, h_.get(), act_, s));
    ATLAS_RETURN_IF_ERROR(
        gemm(h_.get(), m, hidden, w.gate_up, 2 * inter, gu_.get<float>(), 2 * inter, 0));
    ATLAS_CUDA_TRY(cuda::siluMul(gu_.get<float>(), m, inter, act_buf_.get(), act_, s));
    ATLAS_RETURN_IF_ERROR(gemm(act_buf_.get(), m, inter, w.down, hidden, x_rows, hidden, 1.0f));
    return Status::ok();
}

Result<std::unique_ptr<KvCache>> CudaEngine::newSequence(size_t max_tokens) {
    if (max_tokens == 0 || max_tokens > static_cast<size_t>(config_.max_position_embeddings)) {
        return Status{Code::kInvalidArgument,
                      "max_tokens " + std::to_string(max_tokens) + " is outside [1, " +
                          std::to_string(config_.max_position_embeddings) + "]"};
    }
    ATLAS_CUDA_TRY(cudaSetDevice(ctx_->device));
    auto cache = std::make_unique<CudaKvCache>(this, max_tokens, ctx_);
    const size_t bytes = static_cast<size_t>(config_.num_hidden_layers) * 2 * max_tokens *
                         static_cast<size_t>(config_.kvDim()) * actSize(act_);
    ATLAS_RETURN_IF_ERROR(cache->buffer.reserve(bytes));
    return std::unique_ptr<KvCache>(std::move(cache));
}

Result<PrefillResult> CudaEngine::prefillChunk(KvCache& kv, std::span<const int32_t> tokens,
                                               bool last, const std::atomic<bool>* cancel) {
    ATLAS_RETURN_IF_ERROR(kv.checkChunk(this, tokens, config_.vocab_size));
    const size_t n = tokens.size();
    const size_t pos0 = kv.length_;
    ATLAS_CUDA_TRY(cudaSetDevice(ctx_->device));
    auto& cache = static_cast<CudaKvCache&>(kv);
    const int rows = static_cast<int>(n);
    ATLAS_RETURN_IF_ERROR(reserveScratch(rows));
    cudaStream_t s = ctx_->stream;
    const int hidden = static_cast<int>(config_.hidden_size);
    ATLAS_CUDA_TRY(cudaMemcpyAsync(tokens_d_.get(), tokens.data(), n * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, s));
    ATLAS_CUDA_TRY(
        cuda::embedRows(embed_, act_, tokens_d_.get<int32_t>(), rows, hidden, x_.get<float>(), s));
    const size_t layers = layers_.size();
    for (size_t l = 0; l < layers; ++l) {
        if (cancel != nullptr) {
            // With a cancel flag the host waits for each layer, so that the flag is honoured
            // within one layer's time instead of after the whole (asynchronous) chunk.
            ATLAS_CUDA_TRY(cudaStreamSynchronize(s));
            // relaxed: the flag carries no data.
            if (cancel->load(std::memory_order_relaxed)) {
                return Status{Code::kTimeout,
                              "prefill cancelled before layer " + std::to_string(l)};
            }
        }
        const int q_begin = l + 1 < layers ? 0 : (last ? rows - 1 : rows);
        ATLAS_RETURN_IF_ERROR(
            runLayer(l, cache.buffer.get(), kv.capacity_, static_cast<int>(pos0), rows, q_begin));
    }
    PrefillResult result;
    if (last) {
        const float* x_last = x_.get<float>() + static_cast<size_t>(rows - 1) * hidden;
        ATLAS_CUDA_TRY(cuda::rmsNorm(x_last, 1, hidden, final_norm_,
                                     static_cast<float>(config_.rms_norm_eps), h_.get(), act_, s));
        const int vocab = static_cast<int>(config_.vocab_size);
        ATLAS_RETURN_IF_ERROR(
            gemm(h_.get(), 1, hidden, lm_head_, vocab, logits_.get<float>(), vocab, 0));
        result.last_logits.resize(static_cast<size_t>(vocab));
        ATLAS_CUDA_TRY(cudaMemcpyAsync(result.last_logits.data(), logits_.get(),
                                       result.last_logits.size() * sizeof(float),
                                       cudaMemcpyDeviceToHost, s));
    }
    ATLAS_CUDA_TRY(cudaStreamSynchronize(s));
    kv.length_ = pos0 + n;
    result.kv_length = kv.length_;
    if (last) {
        float best = -std::numeric_limits<float>::infinity();
        for (size_t i = 0; i < result.last_logits.size(); ++i) {
            if (result.last_logits[i] > best) {
                best = result.last_logits[i];
                result.next_token = static_cast<int32_t>(i);
            }
        }
        if (result.next_token < 0) {
            return Status{Code::kInternal, "all logits are NaN or -inf"};
        }
    }
    return result;
}

Status CudaEngine::exportKv(const KvCache& kv, DType dtype, std::vector<std::byte>* out,
                            KvLayout* layout) {
    if (kv.owner_ != this) {
        return {Code::kInvalidArgument, "KvCache belongs to another engine"};
    }
    if (out == nullptr || layout == nullptr) {
        return {Code::kInvalidArgument, "exportKv needs out and layout"};
    }
    ATLAS_CUDA_TRY(cudaSetDevice(ctx_->device));
    const auto& cache = static_cast<const CudaKvCache&>(kv);
    *layout = KvLayout{dtype, config_.num_hidden_layers, static_cast<int64_t>(kv.length_),
                       config_.num_key_value_heads, config_.head_dim};
    const size_t a = actSize(act_);
    const DType stored = act_ == ActType::kBF16 ? DType::kBF16 : DType::kF32;
    const size_t per_block = kv.length_ * static_cast<size_t>(config_.kvDim());
    const size_t device_block = kv.capacity_ * static_cast<size_t>(config_.kvDim()) * a;
    std::vector<std::byte> staging(2 * layers_.size() * per_block * a);
    const auto* base = cache.buffer.get<const std::byte>();
    // One 2D copy: 2 * layers blocks of per_block elements, device pitch = the capacity.
    if (per_block > 0) {
        ATLAS_CUDA_TRY(cudaMemcpy2DAsync(staging.data(), per_block * a, base, device_block,
                                         per_block * a, 2 * layers_.size(), cudaMemcpyDeviceToHost,
                                         ctx_->stream));
        ATLAS_CUDA_TRY(cudaStreamSynchronize(ctx_->stream));
    }
    if (stored == dtype) {
        *out = std::move(staging);
        return Status::ok();
    }
    out->resize(layout->totalBytes());
    const size_t count = staging.size() / a;
    constexpr size_t kSlice = 1 << 16;
    std::vector<float> tmp;
    for (size_t first = 0; first < count; first += kSlice) {
        const size_t c = std::min(kSlice, count - first);
        tmp.resize(c);
        convertToFloat(staging.data(), stored, first, c, tmp.data());
        convertFromFloat(tmp.data(), c, dtype, out->data() + first * dtypeSize(dtype));
    }
    return Status::ok();
}

Result<std::unique_ptr<Engine>> makeCudaEngine(std::shared_ptr<const Weights> weights, int device,
                                               bool low_priority_stream) {
    if (weights == nullptr) {
        return Status{Code::kInvalidArgument, "makeCudaEngine: no weights"};
    }
    ATLAS_RETURN_IF_ERROR(validateConfig(weights->config()));
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        return Status{Code::kUnavailable,
                      std::string("no usable CUDA device: ") +
                          (err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0")};
    }
    if (device < 0 || device >= count) {
        return Status{Code::kInvalidArgument, "CUDA device " + std::to_string(device) +
                                                  " does not exist (" + std::to_string(count) +
                                                  " present)"};
    }
    ATLAS_CUDA_TRY(cudaSetDevice(device));
    auto ctx = std::make_shared<StreamContext>();
    ctx->device = device;
    int pools = 0;
    ctx->async_alloc =
        cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) == cudaSuccess &&
        pools != 0;
    // "Least" priority is the numerically largest value (0 on current GPUs, which is also
    // the default): training streams at default or higher priority are scheduled first.
    int least = 0;
    int greatest = 0;
    ATLAS_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    ATLAS_CUDA_TRY(cudaStreamCreateWithPriority(&ctx->stream, cudaStreamNonBlocking,
                                                low_priority_stream ? least : 0));
    auto engine = std::make_unique<CudaEngine>(std::move(weights), std::move(ctx));
    ATLAS_RETURN_IF_ERROR(engine->init());
    return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace atlas::bubbletea
