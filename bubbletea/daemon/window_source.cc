#include "bubbletea/daemon/window_source.h"

#include <algorithm>
#include <optional>

#include "channel/channel_reader.h"

namespace atlas::bubbletea {
namespace {

class AlwaysOpenSource final : public WindowSource {
  public:
    WindowPlan poll(Nanos now_ns) override {
        if (start_ns_ == 0) {
            start_ns_ = now_ns - kNsPerSec;
        }
        WindowPlan plan;
        plan.windows.push_back({start_ns_, kForeverNs});
        plan.version = 1;
        plan.note = "always open";
        return plan;
    }
    std::string describe() const override { return "always open (no channel)"; }

  private:
    Nanos start_ns_ = 0;
};

class DutyCycleSource final : public WindowSource {
  public:
    DutyCycleSource(Nanos period_ns, Nanos open_ns, Nanos origin_ns, int horizon)
        : period_ns_(period_ns), open_ns_(open_ns), origin_ns_(origin_ns), horizon_(horizon) {}

    WindowPlan poll(Nanos now_ns) override {
        WindowPlan plan;
        plan.period_ns = period_ns_;
        plan.version = 1;  // the pattern never changes
        plan.note = "duty cycle";
        // Index of the period containing now (floor division, also before the origin).
        Nanos rel = now_ns - origin_ns_;
        Nanos k = rel >= 0 ? rel / period_ns_ : -((-rel + period_ns_ - 1) / period_ns_);
        for (int i = 0; i <= horizon_; ++i, ++k) {
            const Nanos start = origin_ns_ + k * period_ns_;
            const Nanos end = start + open_ns_;
            if (end > now_ns) {
                plan.windows.push_back({start, end});
            }
        }
        return plan;
    }
    std::string describe() const override {
        return "duty cycle " + std::to_string(open_ns_ / kNsPerUs) + "us open every " +
               std::to_string(period_ns_ / kNsPerUs) + "us (no channel)";
    }

  private:
    Nanos period_ns_;
    Nanos open_ns_;
    Nanos origin_ns_;
    int horizon_;
};

class ChannelSource final : public WindowSource {
  public:
    explicit ChannelSource(ChannelSourceOptions options) : options_(std::move(options)) {}

    WindowPlan poll(Nanos now_ns) override {
        WindowPlan plan;
        plan.withdrawn = true;
        if (!reader_.has_value()) {
            if (now_ns < next_check_ns_) {
                plan.note = note_;
                return plan;
            }
            next_check_ns_ = now_ns + options_.reopen_interval_ns;
            auto r = channel::ChannelReader::open(options_.name);
            if (!r.isOk()) {
                note_ = "channel " + options_.name + " not available: " + r.status().message();
                plan.note = note_;
                return plan;
            }
            ATLAS_LOG_INFO(options_.logger, "bubbletea: attached to bubble channel %s",
                           options_.name.c_str());
            reader_.emplace(std::move(r.value()));
            ++reconnects_;
            confirms_ = false;
        } else if (now_ns >= next_check_ns_) {
            next_check_ns_ = now_ns + options_.reopen_interval_ns;
            auto outcome = reader_->refresh();
            if (outcome.isOk()) {
                writer_gone_ = false;
                switch (outcome.value()) {
                    case channel::RefreshOutcome::kUnchanged:
                        break;
                    case channel::RefreshOutcome::kRestarted:
                        ++reconnects_;
                        confirms_ = false;  // a new writer: learn again whether it confirms
                        break;
                    case channel::RefreshOutcome::kGone:
                        reader_.reset();
                        note_ = "channel " + options_.name + " gone";
                        plan.note = note_;
                        return plan;
                    case channel::RefreshOutcome::kWriterClosed:
                    case channel::RefreshOutcome::kWriterDead:
                        writer_gone_ = true;
                        break;
                }
            }
        }
        if (writer_gone_) {
            plan.note = "channel writer closed or dead";
            return plan;
        }
        auto state = reader_->readState();
        if (!state.isOk()) {
            plan.note = "channel state unreadable: " + state.status().message();
            return plan;
        }
        if (state.value().state != channel::PredictorState::kPredicting) {
            plan.note = std::string("predictor ") + channel::stateName(state.value().state);
            return plan;
        }
        auto set = reader_->readPredictions();
        if (!set.isOk()) {
            plan.note = "channel predictions unreadable: " + set.status().message();
            return plan;
        }
        plan.withdrawn = false;
        plan.note = "predicting";
        plan.period_ns = state.value().stats.period_ns;
        plan.version = (set.value().generation << 40) ^ set.value().set_id ^
                       (static_cast<uint64_t>(reconnects_) << 56);
        for (const auto& w : set.value().windows) {
            confirms_ |= w.source == channel::WindowSource::kPredictorOpen;
        }
        for (const auto& w : set.value().windows) {
            // A writer that confirms windows (it has published a kPredictorOpen one) withdraws
            // a due window whose wait has not begun, but a poll can see it in the tick before
            // that: a due, unconfirmed window is not started in. Ones still ahead stay (plans).
            const bool unconfirmed =
                confirms_ && w.source == channel::WindowSource::kPredictor && w.start_ns <= now_ns;
            if (w.end_ns > now_ns && w.end_ns > w.start_ns && !unconfirmed &&
                w.confidence_ppm >= options_.min_confidence_ppm) {
                plan.windows.push_back({w.start_ns, w.end_ns});
            }
        }
        std::sort(plan.windows.begin(), plan.windows.end(),
                  [](const Window& a, const Window& b) { return a.start_ns < b.start_ns; });
        // Merge overlaps so consumers can rely on disjoint windows.
        std::vector<Window> merged;
        for (const auto& w : plan.windows) {
            if (!merged.empty() && w.start_ns <= merged.back().end_ns) {
                merged.back().end_ns = std::max(merged.back().end_ns, w.end_ns);
            } else {
                merged.push_back(w);
            }
        }
        plan.windows = std::move(merged);
        if (plan.windows.empty()) {
            plan.note = "predicting (no window ahead)";
        }
        return plan;
    }

    std::string describe() const override { return "bubble channel " + options_.name; }

  private:
    ChannelSourceOptions options_;
    std::optional<channel::ChannelReader> reader_;
    Nanos next_check_ns_ = 0;
    bool writer_gone_ = false;
    bool confirms_ = false;  // the writer publishes kPredictorOpen windows (sticky)
    uint32_t reconnects_ = 0;
    std::string note_ = "channel not opened yet";
};

}  // namespace

std::unique_ptr<WindowSource> makeAlwaysOpenSource() {
    return std::make_unique<AlwaysOpenSource>();
}

std::unique_ptr<WindowSource> makeDutyCycleSource(Nanos period_ns, Nanos open_ns, Nanos origin_ns,
                                                  int horizon) {
    return std::make_unique<DutyCycleSource>(period_ns, open_ns, origin_ns, std::max(horizon, 1));
}

std::unique_ptr<WindowSource> makeChannelSource(ChannelSourceOptions options) {
    return std::make_unique<ChannelSource>(std::move(options));
}

}  // namespace atlas::bubbletea
