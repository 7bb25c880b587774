// Package head turns a classifier's logits into the columns a user
// reads, as transformers' text-classification pipeline and
// sentence-transformers' CrossEncoder make them: probabilities, the
// class, its score and its label.
//
// A [Head] is a stage of its own over a model's logits column: [Wrap]
// makes a device.Model whose predictions are the wrapped model's with
// the head's columns after them. The function follows the model's
// config.json ([Pick]): softmax for single-label classifiers, sigmoid
// for one logit (cross-encoders) and multi-label classifiers, none for
// regression.
//
// Columns, for logits of width n:
//
//   - n > 1, softmax or sigmoid: "probabilities" (the function of every
//     logit), "class" (the argmax), "score" (its probability) and, with
//     labels, "label";
//   - n > 1, no function: "class", "score" (the largest logit) and
//     "label";
//   - n = 1: "score" (the sigmoid of the logit, or the logit itself).
package head
