// Daemon: the whole bubbletea process minus main(): loads the model, builds the engine,
// profiles it to seed the cost model, attaches the window sources, and serves HTTP.
//
// Lifecycle: create() (blocking: model load and profiling) -> start() (HTTP threads) ->
// wait() until stopped. requestDrain() (SIGTERM, or a test) stops accepting, finishes or
// rejects queued work within drain_timeout, waits for open responses, then stops; wait()
// returns and the process exits 0. stop() ends at once (queued work fails with 503).
//
// Threads: create/start/wait/stop from one controlling thread; requestDrain() and the
// accessors from any thread. HTTP runs on config.http_threads io_context threads; prefill
// on the worker's thread; KV pushes on the pusher's thread.
#pragma once

#include <memory>
#include <string>

#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "bubbletea/daemon/config.h"
#include "bubbletea/daemon/cost_model.h"
#include "bubbletea/daemon/metrics.h"
#include "bubbletea/tokenizer/tokenizer.h"

namespace atlas::bubbletea {

class Worker;

class Daemon {
  public:
    static Result<std::unique_ptr<Daemon>> create(const DaemonConfig& config, Logger logger);
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // Starts the HTTP threads (listening already happened in create()).
    void start();
    // SIGTERM/SIGINT start a drain (installs an asio signal_set).
    void handleSignals();
    // Blocks until the daemon stopped (after a drain or stop()).
    void wait();
    void requestDrain();
    void stop();

    uint16_t port() const;
    const std::string& modelName() const;
    const std::string& engineId() const;
    const CostCoefficients& initialCost() const;
    Metrics& metrics();
    Worker& worker();

    struct Impl;

  private:
    explicit Daemon(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Builds the engine `config` asks for (used by the daemon and by tests that compare against
// a direct engine run). `threads` for the cpu engine: 0 = hardware concurrency.
// `tokenizer_vocab` > 0 (a tokenizer is served): --random-weights shapes take that
// vocabulary size; a checkpoint whose vocabulary is smaller (ids its embedding cannot hold)
// is refused. A larger one is fine: checkpoints pad their embedding tables.
class Engine;
Result<std::unique_ptr<Engine>> makeEngineFromConfig(const DaemonConfig& config,
                                                     std::string* model_name,
                                                     int64_t tokenizer_vocab = 0);

// The tokenizer `config` serves: --tokenizer FILE, else <model-dir>/tokenizer.json when it
// exists, else none (nullptr). A file that is there but unusable is an error.
Result<std::shared_ptr<const Tokenizer>> loadTokenizerFromConfig(const DaemonConfig& config);

}  // namespace atlas::bubbletea
