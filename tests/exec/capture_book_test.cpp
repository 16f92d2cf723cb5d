// CaptureBook (exec/capture_book.h), the books of a transport that records its transfers into
// step graphs, against hand-worked sequences of posts, waits and a capture's end.
#include "stagecraft/exec/capture_book.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace stagecraft::exec {
namespace {

using Requests = std::vector<Transport::Request>;

// Outside a capture nothing is recorded: the host carries the transfer out.
TEST(CaptureBook, APostOutsideACaptureIsTheHosts) {
  CaptureBook book;
  book.Posted(0, 7);
  EXPECT_FALSE(book.Captured(0));
  EXPECT_EQ(book.StampOf(0), -1);
  EXPECT_NO_THROW(book.CheckWaitable(0, 1));
  EXPECT_FALSE(book.Captured(5)) << "a request never posted";
}

// A capture with a send (0), a receive its consumer waits for (1) and a receive nobody waited
// for (2): only 0 and 2 are joined at the end; all three are complete from then on, and a
// receive ordered after the end needs no wait of its own.
TEST(CaptureBook, TheEndJoinsWhatNoConsumerWaitedFor) {
  CaptureBook book;
  book.Posted(9, -1);  // eager, before the capture
  book.Begin();
  EXPECT_TRUE(book.open());
  book.Posted(0, 100);
  book.Posted(1, 101);
  book.Posted(2, 102);
  EXPECT_TRUE(book.Captured(0) && book.Captured(1) && book.Captured(2));
  EXPECT_FALSE(book.Captured(9));
  EXPECT_EQ(book.StampOf(1), 101);
  EXPECT_FALSE(book.Joined(0));
  EXPECT_THROW(book.CheckWaitable(0, 3), std::logic_error) << "it runs only when the graph is launched";
  EXPECT_TRUE(book.OrderNow(1)) << "the consumer's wait is recorded once";
  EXPECT_FALSE(book.OrderNow(1));
  EXPECT_EQ(book.End(), (Requests{0, 2}));
  EXPECT_FALSE(book.open());
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(book.Joined(r)) << r;
    EXPECT_NO_THROW(book.CheckWaitable(r, 3));
  }
  EXPECT_FALSE(book.OrderNow(2)) << "joined: the launch before orders it";
  EXPECT_THROW(book.End(), std::logic_error);
}

// A released handle is forgotten, also mid-capture (its end then joins nothing for it), and a
// handle given out again starts afresh.
TEST(CaptureBook, AReleasedHandleIsForgotten) {
  CaptureBook book;
  book.Begin();
  book.Posted(0, 10);
  book.Posted(1, 11);
  book.Released(0);
  EXPECT_FALSE(book.Captured(0));
  EXPECT_EQ(book.End(), (Requests{1}));
  book.Released(1);
  book.Posted(1, -1);
  EXPECT_FALSE(book.Captured(1)) << "handle 1 again, posted outside a capture";
}

// An abandoned capture returns its requests for release and closes; a second capture may open.
TEST(CaptureBook, AbandonReturnsTheCapturesRequests) {
  CaptureBook book;
  book.Begin();
  EXPECT_THROW(book.Begin(), std::logic_error);
  book.Posted(3, 30);
  book.Posted(4, 40);
  book.Released(4);
  EXPECT_EQ(book.Abandon(), (Requests{3}));
  EXPECT_FALSE(book.open());
  EXPECT_NO_THROW(book.Begin());
}

}  // namespace
}  // namespace stagecraft::exec
