// Package hfmodel reads a model folder as sentence-transformers and
// transformers read it, so a Go service runs the model people download
// with the same numbers: [Open] reads the folder, [Folder.Model] makes
// the device.Model over the engine that runs its ONNX file.
//
// # What is read
//
//   - config.json: model_type (RoBERTa's family numbers positions from
//     padding_idx + 1), pad_token_id, vocab_size,
//     max_position_embeddings, id2label, num_labels and problem_type (the
//     head), a cross-encoder's activation;
//   - tokenizer_config.json: model_max_length, padding_side,
//     truncation_side;
//   - modules.json and each module's folder: Transformer
//     (sentence_bert_config.json's max_seq_length), Pooling (every mode,
//     several concatenated in sentence-transformers' order), Dense
//     (config.json and model.safetensors) and Normalize. Any other module
//     is an error naming it;
//   - tokenizer.json, truncating each text to the model's length inside
//     the tokenizer, special tokens kept, as sentence-transformers and
//     Text Embeddings Inference do.
//
// # The length
//
// A text keeps MaxLength tokens: max_seq_length, else model_max_length,
// else the positions the model has, and never more than those positions
// (RoBERTa's max_position_embeddings less padding_idx + 1), whatever the
// folder omits: a row past them would index past the position table.
package hfmodel
